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
