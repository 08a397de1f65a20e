{{- define "oncehook.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "oncehook.secretName" -}}
{{- default (include "oncehook.fullname" .) .Values.secret.name -}}
{{- end -}}

{{- define "oncehook.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: serve, worker or migrate */}}
{{- define "oncehook.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "oncehook.image" -}}
{{ printf "%s:%s" .Values.image.repository (toString .Values.image.tag) | quote }}
{{- end -}}

{{/* the environment of every oncehook container: secrets by key, then plain values */}}
{{- define "oncehook.env" -}}
{{- range .Values.secretEnv }}
- name: {{ . }}
  valueFrom:
    secretKeyRef:
      name: {{ include "oncehook.secretName" $ }}
      key: {{ . }}
{{- end }}
{{- range $k, $v := .Values.env }}
- name: {{ $k }}
  value: {{ toString $v | quote }}
{{- end }}
{{- end -}}
