package install

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The whitesky.cloud simulator in the cluster: Deployment and Service vcosim in namespace vcosim.
const (
	SimulatorNamespace = "vcosim"
	SimulatorName      = "vcosim"
	simulatorPort      = 8080
	// SimulatorSecret is the credentials Secret the simulator prints (cmd/vcosim's default).
	SimulatorSecret = "capvco-credentials"
	// secretBanner starts the Secret cmd/vcosim prints on stdout.
	secretBanner = "# whitesky.cloud simulator credentials"
)

// Simulator is the whitesky.cloud simulator running in the cluster.
type Simulator struct {
	// URL is where pods reach it: the Service's ClusterIP, since the local cluster runs no DNS.
	URL string
	// Credentials is the Secret it printed (url, customer, jwt, clientID, clientSecret, iamURL),
	// as applied to the cluster.
	Credentials *corev1.Secret
}

// DeploySimulator runs cmd/vcosim from image in the cluster behind a Service, with its state on
// an emptyDir (a container restart keeps tokens valid), and applies the credentials Secret it
// prints into secretNamespace (created if missing). Repeating it updates the Deployment and
// re-applies the Secret.
func (m *Management) DeploySimulator(ctx context.Context, image, secretNamespace string) (*Simulator, error) {
	labels := map[string]string{"app.kubernetes.io/name": SimulatorName}
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: SimulatorNamespace, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}},
	}
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: SimulatorName, Namespace: SimulatorNamespace, Labels: labels},
		Spec: corev1.ServiceSpec{
			Selector: labels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: simulatorPort, TargetPort: intstr.FromString("http")}},
		},
	}
	if err := m.applyObjects(ctx, "the simulator's namespace and Service", ns, svc); err != nil {
		return nil, err
	}
	if err := m.Client.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		return nil, err
	}
	sim := &Simulator{URL: fmt.Sprintf("http://%s:%d", svc.Spec.ClusterIP, simulatorPort)}
	dep := simulatorDeployment(image, sim.URL, secretNamespace, labels)
	if err := m.applyObjects(ctx, "the simulator's Deployment", dep); err != nil {
		return nil, err
	}
	if err := m.WaitDeployments(ctx, 2*time.Minute, client.ObjectKeyFromObject(dep)); err != nil {
		return nil, err
	}
	secret, err := m.simulatorCredentials(ctx, labels)
	if err != nil {
		return nil, err
	}
	target := &corev1.Namespace{TypeMeta: ns.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: secretNamespace}}
	if err := m.applyObjects(ctx, "the simulator's credentials Secret "+secretNamespace+"/"+secret.Name, target, secret); err != nil {
		return nil, err
	}
	sim.Credentials = secret
	return sim, nil
}

func simulatorDeployment(image, url, secretNamespace string, labels map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: SimulatorName, Namespace: SimulatorNamespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			// One simulator at a time: two would each sign their own tokens.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext:               restrictedPod(),
					TerminationGracePeriodSeconds: ptr.To[int64](10),
					Containers: []corev1.Container{{
						Name:            SimulatorName,
						Image:           image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Args: []string{
							fmt.Sprintf("-listen=0.0.0.0:%d", simulatorPort),
							"-advertise-url=" + url,
							"-state-file=/data/state.json",
							// Demo speed: DNS writes take 0.3 s instead of 30 s.
							"-time-scale=0.01",
							"-secret-name=" + SimulatorSecret,
							"-secret-namespace=" + secretNamespace,
						},
						Ports:           []corev1.ContainerPort{{Name: "http", ContainerPort: simulatorPort}},
						ReadinessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}}},
						SecurityContext: restrictedContainer(),
						VolumeMounts:    []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
					}},
					Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// simulatorCredentials reads the Secret the running simulator printed from its log.
func (m *Management) simulatorCredentials(ctx context.Context, labels map[string]string) (*corev1.Secret, error) {
	pods := &corev1.PodList{}
	if err := m.Client.List(ctx, pods, client.InNamespace(SimulatorNamespace), client.MatchingLabels(labels)); err != nil {
		return nil, err
	}
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		log, err := m.podLog(ctx, p.Namespace, p.Name, SimulatorName)
		if err != nil {
			return nil, err
		}
		return parsePrintedSecret(log)
	}
	return nil, fmt.Errorf("no running simulator pod in %s", SimulatorNamespace)
}

// secretLineRE matches the lines of the printed manifest: top-level and indented keys.
var secretLineRE = regexp.MustCompile(`^(  )?[A-Za-z][A-Za-z0-9]*:( |$)`)

// secretKey tells a top-level key of a Secret manifest (or an indented line under one) from
// another program's "name: message" line.
func secretKey(line string) bool {
	if strings.HasPrefix(line, "  ") {
		return true
	}
	key, _, _ := strings.Cut(line, ":")
	switch key {
	case "apiVersion", "kind", "metadata", "type", "data", "stringData", "immutable":
		return true
	}
	return false
}

// parsePrintedSecret finds the Secret manifest cmd/vcosim printed on stdout in a log that also
// holds its stderr: the lines from the banner to the end of the manifest's last key.
func parsePrintedSecret(log []byte) (*corev1.Secret, error) {
	var doc bytes.Buffer
	in := false
	sc := bufio.NewScanner(bytes.NewReader(log))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, secretBanner):
			in = true
			doc.Reset()
			continue
		case !in:
			continue
		case !secretLineRE.MatchString(line) || !secretKey(line):
			// The first line that is not a key of the manifest ends it: request logs on stderr
			// start with a timestamp, and the "vcosim: serving ..." line, which may come right
			// after the manifest, is not a Secret's key.
			in = false
			continue
		}
		doc.WriteString(line + "\n")
	}
	s := &corev1.Secret{}
	if err := yaml.UnmarshalStrict(doc.Bytes(), s); err != nil || s.StringData["jwt"] == "" {
		return nil, fmt.Errorf("the simulator's log holds no credentials Secret (%v)", err)
	}
	s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
	return s, nil
}

// ProbeFromPod runs test/images/httpget (image) as an ephemeral container of a running pod, so
// in that pod's network namespace, against url with a Bearer token (may be empty). It returns
// what httpget printed, and an error unless the URL answered 2xx (a *ProbeError when httpget
// ran). The token ends up in the pod's spec: use it only with throwaway credentials such as the
// simulator's.
func (m *Management) ProbeFromPod(ctx context.Context, pod client.ObjectKey, image, url, bearer string) (string, error) {
	cs, err := kubernetes.NewForConfig(m.Config)
	if err != nil {
		return "", err
	}
	p, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	name := "httpget-" + rand.String(5)
	var env []corev1.EnvVar
	if bearer != "" {
		env = []corev1.EnvVar{{Name: "HTTPGET_BEARER", Value: bearer}}
	}
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"/httpget", url}, Env: env,
			SecurityContext:          restrictedContainer(),
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		},
	})
	if _, err := cs.CoreV1().Pods(pod.Namespace).UpdateEphemeralContainers(ctx, pod.Name, p, metav1.UpdateOptions{}); err != nil {
		return "", fmt.Errorf("add an ephemeral container to %s: %w", pod, err)
	}
	var exit int32
	err = m.Wait(ctx, fmt.Sprintf("httpget %s from pod %s", url, pod), time.Minute, func(ctx context.Context) (bool, string, error) {
		p, err := cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, st := range p.Status.EphemeralContainerStatuses {
			if st.Name != name {
				continue
			}
			if t := st.State.Terminated; t != nil {
				exit = t.ExitCode
				return true, "", nil
			}
			if w := st.State.Waiting; w != nil {
				return false, w.Reason + " " + w.Message, nil
			}
		}
		return false, "not started", nil
	})
	if err != nil {
		return "", err
	}
	out, err := m.podLog(ctx, pod.Namespace, pod.Name, name)
	if err != nil {
		return "", err
	}
	if exit != 0 {
		return string(out), &ProbeError{URL: url, Pod: pod, Exit: exit, Output: strings.TrimSpace(string(out))}
	}
	return string(out), nil
}

// podLog returns a container's log.
func (m *Management) podLog(ctx context.Context, namespace, pod, container string) ([]byte, error) {
	cs, err := kubernetes.NewForConfig(m.Config)
	if err != nil {
		return nil, err
	}
	return cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
}

// applyObjects applies typed objects (with TypeMeta set) server-side.
func (m *Management) applyObjects(ctx context.Context, what string, objs ...client.Object) error {
	var b bytes.Buffer
	for _, o := range objs {
		y, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return m.Apply(ctx, what, b.Bytes())
}

// restrictedPod and restrictedContainer satisfy the restricted Pod Security Standard, which the
// capx-system and vcosim namespaces enforce.
func restrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To[int64](65532),
		RunAsGroup:     ptr.To[int64](65532),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		RunAsNonRoot:             ptr.To(true),
		RunAsUser:                ptr.To[int64](65532),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}
