-- promote: express.dev/promote with a new request id ends the current wave's bake; the
-- operator acts on each id once.
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["express.dev/promote"] = "argocd-" .. tostring(obj.metadata.resourceVersion or "0")
obj.metadata.annotations["express.dev/promote-full"] = nil
return obj
