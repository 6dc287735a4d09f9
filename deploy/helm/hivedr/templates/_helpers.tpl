{{- define "hivedr.fullname" -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "hivedr.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "hivedr.secretName" -}}
{{- default (printf "%s-secrets" (include "hivedr.fullname" .)) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* The pod spec of one role: hivedr.pod (dict "root" $ "role" "copyd" "port" 9465 "resources" ... "stateDir" true) */}}
{{- define "hivedr.pod" -}}
{{- $root := .root -}}
metadata:
  labels:
    {{- include "hivedr.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .role }}
  annotations:
    checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
spec:
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: 60
  containers:
    - name: {{ .role }}
      image: "{{ $root.Values.image.repository }}:{{ default $root.Chart.AppVersion $root.Values.image.tag }}"
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        - {{ .role }}
        - -config=/etc/hivedr/hivedr.yaml
        - -log-format=json
        {{- if .stateDir }}
        - -state-dir=/var/lib/hivedr/state
        {{- end }}
      env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
      {{- if or $root.Values.secrets.existingSecret $root.Values.secrets.values }}
      envFrom:
        - secretRef: {name: {{ include "hivedr.secretName" $root }}}
      {{- end }}
      ports:
        - {name: metrics, containerPort: {{ .port }}}
      livenessProbe:
        httpGet: {path: /healthz, port: metrics}
        {{- toYaml $root.Values.probes.liveness | nindent 8 }}
      readinessProbe:
        httpGet: {path: /readyz, port: metrics}
        {{- toYaml $root.Values.probes.readiness | nindent 8 }}
      resources:
        {{- toYaml .resources | nindent 8 }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      volumeMounts:
        - {name: config, mountPath: /etc/hivedr, readOnly: true}
        - {name: state, mountPath: /var/lib/hivedr}
        - {name: tmp, mountPath: /tmp}
  volumes:
    - name: config
      configMap: {name: {{ include "hivedr.fullname" $root }}-config}
    - name: state
      emptyDir: {}
    - name: tmp
      emptyDir: {}
{{- end -}}
