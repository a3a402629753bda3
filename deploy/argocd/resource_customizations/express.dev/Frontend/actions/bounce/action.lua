-- bounce: express.dev/bounce with a new request id; the operator restarts the node's pod once.
-- The request says all of its options: a force or timeout left by an earlier request is removed,
-- so this one is a plain bounce with the default timeout.
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["express.dev/bounce"] = "argocd-" .. tostring(obj.metadata.resourceVersion or "0")
obj.metadata.annotations["express.dev/bounce-force"] = nil
obj.metadata.annotations["express.dev/bounce-timeout"] = nil
return obj
