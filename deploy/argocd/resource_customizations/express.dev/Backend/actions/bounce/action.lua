-- bounce: express.dev/bounce with a new request id; the operator restarts the node's pod once.
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["express.dev/bounce"] = "argocd-" .. tostring(obj.metadata.resourceVersion or "0")
return obj
