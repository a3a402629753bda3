-- abort-rollback: abort, and return the nodes the rollout changed to their previous revision.
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["express.dev/abort"] = "argocd-" .. tostring(obj.metadata.resourceVersion or "0")
obj.metadata.annotations["express.dev/abort-rollback"] = "true"
return obj
