-- retry: express.dev/retry with a new request id clears a failed or aborted rollout.
if obj.metadata.annotations == nil then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["express.dev/retry"] = "argocd-" .. tostring(obj.metadata.resourceVersion or "0")
return obj
