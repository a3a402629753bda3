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

{{- /* The selector of one ring's Deployment; ring default keeps the selector of the chart's
releases before rings (a Deployment's selector cannot change). Call with (dict "root" $ "ring" NAME). */ -}}
{{- define "express-operator.ringSelector" -}}
app.kubernetes.io/name: {{ if eq .ring "default" }}express-operator{{ else }}express-operator-{{ .ring }}{{ end }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- end -}}

{{- /* What every ring's pods carry: the metrics Service selects them all. */ -}}
{{- define "express-operator.podsOfEveryRing" -}}
app.kubernetes.io/part-of: express-operator
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "express-operator.ringResourceName" -}}
{{ if eq . "default" }}express-operator{{ else }}express-operator-{{ . }}{{ end }}
{{- end -}}
