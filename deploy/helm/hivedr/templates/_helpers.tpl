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

{{- define "hivedr.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hivedr.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* hivedr.roles: the roles as YAML, by values key: the component (the
subcommand, and the suffix of the objects' names) and the role's values.
Every role template, the ConfigMap and the Services range over it. */}}
{{- define "hivedr.roles" -}}
tailer: {component: tail, kind: Deployment}
copyd: {component: copyd, kind: StatefulSet, stateDir: true}
applier: {component: apply, kind: StatefulSet, stateDir: true}
{{- end -}}

{{/* hivedr.roleSecretName: the Secret a role's own `secrets` give its
environment: (dict "root" $ "component" "tail" "values" .Values.tailer). */}}
{{- define "hivedr.roleSecretName" -}}
{{- default (printf "%s-%s-secrets" (include "hivedr.fullname" .root) .component) .values.secrets.existingSecret -}}
{{- end -}}

{{/* hivedr.mergeBy: the top-level list .global and the role's list .role
merged by the field .key as YAML: the global entries the role does not
override, then the role's. */}}
{{- define "hivedr.mergeBy" -}}
{{- $key := .key -}}
{{- $mine := list -}}
{{- range .role }}{{ $mine = append $mine (get . $key) }}{{ end -}}
{{- $out := list -}}
{{- range .global }}{{ if not (has (get . $key) $mine) }}{{ $out = append $out . }}{{ end }}{{ end -}}
{{- range .role }}{{ $out = append $out . }}{{ end -}}
{{- if $out }}{{ toYaml $out }}{{ end -}}
{{- end -}}

{{/* hivedr.pod: the pod template of one role:
(dict "root" $ "key" "copyd" "component" "copyd" "values" .Values.copyd "stateDir" true) */}}
{{- define "hivedr.pod" -}}
{{- $root := .root -}}
{{- $v := .values -}}
{{- $env := include "hivedr.mergeBy" (dict "key" "name" "global" $root.Values.extraEnv "role" $v.extraEnv) -}}
{{- $volumes := include "hivedr.mergeBy" (dict "key" "name" "global" $root.Values.extraVolumes "role" $v.extraVolumes) -}}
{{- $mounts := include "hivedr.mergeBy" (dict "key" "mountPath" "global" $root.Values.extraVolumeMounts "role" $v.extraVolumeMounts) -}}
{{- range (fromYamlArray (default "[]" $volumes)) }}
{{- if has .name (list "config" "state" "tmp" "identity") }}
{{- fail (printf "%s: extraVolumes: the name %q is the chart's own (config, state, tmp, identity)" $.key .name) }}
{{- end }}
{{- end -}}
{{- $annotations := merge (dict) $v.podAnnotations $root.Values.podAnnotations -}}
metadata:
  labels:
    {{- include "hivedr.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations:
    checksum/config: {{ include (print $root.Template.BasePath "/configmap.yaml") $root | sha256sum }}
    {{- with $annotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ default (include "hivedr.serviceAccountName" $root) $v.serviceAccountName }}
  automountServiceAccountToken: false
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: 60
  {{- with (default $root.Values.nodeSelector $v.nodeSelector) }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with (default $root.Values.affinity $v.affinity) }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with (default $root.Values.tolerations $v.tolerations) }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: {{ .component }}
      image: "{{ $root.Values.image.repository }}:{{ default $root.Chart.AppVersion $root.Values.image.tag }}"
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        - {{ .component }}
        - -config=/etc/hivedr/hivedr.yaml
        - -log-format=json
        {{- if .stateDir }}
        - -state-dir=/var/lib/hivedr/state
        {{- end }}
      env:
        - name: POD_NAME
          valueFrom: {fieldRef: {fieldPath: metadata.name}}
        {{- with $v.identity.principal }}
        - {name: HIVEDR_PRINCIPAL, value: {{ . | quote }}}
        {{- end }}
        {{- with $v.identity.kafkaUser }}
        - {name: HIVEDR_KAFKA_USER, value: {{ . | quote }}}
        {{- end }}
        {{- with $env }}
        {{- . | nindent 8 }}
        {{- end }}
      {{- $global := or $root.Values.secrets.existingSecret $root.Values.secrets.values }}
      {{- $own := or $v.secrets.existingSecret $v.secrets.values }}
      {{- if or $global $own }}
      envFrom:
        {{- if $global }}
        - secretRef: {name: {{ include "hivedr.secretName" $root }}}
        {{- end }}
        {{- if $own }}
        - secretRef: {name: {{ include "hivedr.roleSecretName" (dict "root" $root "component" .component "values" $v) }}}
        {{- end }}
      {{- end }}
      ports:
        - {name: metrics, containerPort: {{ $v.port }}}
      startupProbe:
        httpGet: {path: /healthz, port: metrics}
        {{- toYaml $root.Values.probes.startup | nindent 8 }}
      livenessProbe:
        httpGet: {path: /healthz, port: metrics}
        {{- toYaml $root.Values.probes.liveness | nindent 8 }}
      readinessProbe:
        httpGet: {path: /readyz, port: metrics}
        {{- toYaml $root.Values.probes.readiness | nindent 8 }}
      resources:
        {{- toYaml $v.resources | nindent 8 }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      volumeMounts:
        - {name: config, mountPath: /etc/hivedr, readOnly: true}
        - {name: state, mountPath: /var/lib/hivedr}
        - {name: tmp, mountPath: /tmp}
        {{- if $v.identity.secret }}
        - {name: identity, mountPath: {{ $root.Values.identityMountPath }}, readOnly: true}
        {{- end }}
        {{- with $mounts }}
        {{- . | nindent 8 }}
        {{- end }}
  volumes:
    - name: config
      configMap: {name: {{ include "hivedr.fullname" $root }}-config}
    - name: state
      emptyDir: {}
    - name: tmp
      emptyDir: {}
    {{- with $v.identity.secret }}
    - name: identity
      secret: {secretName: {{ . }}, defaultMode: 0440}
    {{- end }}
    {{- with $volumes }}
    {{- . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* hivedr.workload: a role's Deployment (the tailer) or StatefulSet:
(dict "root" $ "key" "copyd") */}}
{{- define "hivedr.workload" -}}
{{- $root := .root -}}
{{- $role := get (include "hivedr.roles" $root | fromYaml) .key -}}
{{- $v := get $root.Values .key -}}
{{- if $v.enabled }}
apiVersion: apps/v1
kind: {{ $role.kind }}
metadata:
  name: {{ include "hivedr.fullname" $root }}-{{ $role.component }}
  labels:
    {{- include "hivedr.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ $role.component }}
spec:
  {{- if eq $role.kind "Deployment" }}
  replicas: 1
  strategy: {type: Recreate}
  {{- else }}
  replicas: {{ $v.replicas }}
  serviceName: {{ include "hivedr.fullname" $root }}-{{ $role.component }}
  podManagementPolicy: Parallel
  {{- end }}
  selector:
    matchLabels: {app.kubernetes.io/instance: {{ $root.Release.Name }}, app.kubernetes.io/component: {{ $role.component }}}
  template:
    {{- include "hivedr.pod" (dict "root" $root "key" .key "component" $role.component "values" $v "stateDir" $role.stateDir) | nindent 4 }}
{{- end }}
{{- end -}}
