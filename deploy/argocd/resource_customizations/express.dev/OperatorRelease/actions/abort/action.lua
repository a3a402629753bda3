-- abort: express.dev/rollback with a new request id; every moved tenant goes back.
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["express.dev/rollback"] = "argocd-" .. tostring(obj.metadata.resourceVersion or "0")
return obj
