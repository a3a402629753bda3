{{- define "express-tenant.clusterConfig" -}}
clusterConfig:
  clusterName: {{ .Values.clusterName | quote }}
  tenantID: {{ .Values.tenantID }}
  tenantName: {{ .Values.tenantName | quote }}
{{- end -}}

{{- define "express-tenant.prerequisite" -}}
- expressNode: {{ .node | quote }}
  kind: {{ .kind }}
  podConditionType: Ready
  conditionStatus: "True"
{{- end -}}

{{- /*
express.dev/rollout-id, stamped on every object so that the operator starts nothing before
every node of a delivery has been written (DESIGN section 3, rule 8). Default: a digest of the
values, the same for the same values, new for any change.
*/ -}}
{{- define "express-tenant.rolloutId" -}}
{{- .Values.rolloutId | default (.Values | toJson | sha256sum | trunc 12) -}}
{{- end -}}

{{- define "express-tenant.annotations" -}}
annotations:
  express.dev/rollout-id: {{ include "express-tenant.rolloutId" . | quote }}
{{- end -}}
