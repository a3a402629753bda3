-- promote-full: every remaining wave now, no more baking or judging.
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["express.dev/promote"] = "argocd-" .. tostring(obj.metadata.resourceVersion or "0")
obj.metadata.annotations["express.dev/promote-full"] = "true"
return obj
