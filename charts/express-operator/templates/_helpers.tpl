{{- define "express-operator.name" -}}express-operator{{- end -}}

{{- define "express-operator.labels" -}}
app.kubernetes.io/name: express-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "express-operator.selector" -}}
app.kubernetes.io/name: express-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
