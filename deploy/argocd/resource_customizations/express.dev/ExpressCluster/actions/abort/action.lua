-- abort: express.dev/abort with a new request id; the operator acts on each id once.
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["express.dev/abort"] = "argocd-" .. tostring(obj.metadata.resourceVersion or "0")
obj.metadata.annotations["express.dev/abort-rollback"] = nil
return obj
