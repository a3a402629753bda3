{{- define "express-tenant.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{- /* The Kubernetes kind of a node key: `be` is the Backend, anything else (feN) a Frontend. */ -}}
{{- define "express-tenant.kind" -}}
{{- if eq . "be" }}Backend{{ else }}Frontend{{ end -}}
{{- end -}}

{{- define "express-tenant.clusterConfig" -}}
clusterConfig:
  clusterName: {{ .Values.instance | quote }}
  tenantID: {{ .Values.instanceId }}
  tenantName: {{ .Values.tenantName | default .Values.instance | quote }}
{{- end -}}

{{- /*
Explicit prerequisites on node keys (a key or a list of keys): every one must be Ready.
Arguments: root (the chart's context), keys, and beta (true: at v1beta1).
*/ -}}
{{- define "express-tenant.prerequisites" -}}
{{- $root := .root -}}
{{- $keys := .keys -}}
{{- if kindIs "string" $keys }}{{ $keys = list $keys }}{{ end -}}
{{- range $keys }}
{{- if $.beta }}
- node: {{ printf "%s-%s" $root.Values.instance . | quote }}
  kind: {{ include "express-tenant.kind" . }}
  condition:
    type: Ready
    status: "True"
{{- else }}
- expressNode: {{ printf "%s-%s" $root.Values.instance . | quote }}
  kind: {{ include "express-tenant.kind" . }}
  podConditionType: Ready
  conditionStatus: "True"
{{- end }}
{{- end -}}
{{- end -}}

{{- /*
express.dev/rollout-id, stamped on every object so that the operator starts nothing before
every node of a delivery has been written (DESIGN section 3, rule 8). Default: a digest of the
values, the same for the same values, new for any change (but the ring and the API version the
objects are written at: neither is a delivery).
*/ -}}
{{- define "express-tenant.rolloutId" -}}
{{- .Values.rolloutId | default (omit .Values "operatorRing" "apiVersion" | toJson | sha256sum | trunc 12) -}}
{{- end -}}

{{- /* Namespace, labels and the rollout-id stamp. Arguments: root, and optionally revision
(the node's express.dev/deployment-revision override). */ -}}
{{- define "express-tenant.metadata" -}}
{{- $root := .root -}}
namespace: {{ include "express-tenant.namespace" $root }}
labels:
  app.kubernetes.io/managed-by: {{ $root.Release.Service }}
  app.kubernetes.io/instance: {{ $root.Release.Name }}
  {{- with $root.Values.dc }}
  express.dev/dc: {{ . | quote }}
  {{- end }}
  {{- with .revision }}
  express.dev/deployment-revision: {{ . | quote }}
  {{- end }}
  {{- with .ring }}
  express.dev/operator-ring: {{ . | quote }}
  {{- end }}
annotations:
  express.dev/rollout-id: {{ include "express-tenant.rolloutId" $root | quote }}
{{- end -}}
