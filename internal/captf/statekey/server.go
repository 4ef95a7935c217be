package statekey

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/captf/contract"
)

// Audience is the audience of the projected token a runner Pod presents: a token for the API
// server is not accepted, and this token is accepted by nothing else.
const Audience = "state-key.captf.io"

// TokenPath is where a Job's module container finds its token of Audience.
const TokenPath = "/var/run/secrets/captf.io/state-key/token"

// Path is the endpoint's one route.
const Path = "/v1/state-key"

// runnerAccount is the ServiceAccount the manager makes for runners in every namespace.
const runnerAccount = "captf-runner"

// Extra keys of a TokenReview of a Pod-bound projected token.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// maxTokenBytes bounds the Authorization header's token.
const maxTokenBytes = 16 << 10

// Server hands a runner Pod the key of its own object's state. It authenticates the Pod's
// projected ServiceAccount token with a TokenReview (audience Audience, bound to the Pod) and
// authorizes by what the API server says: the Pod is the one the token is bound to, runs as
// the token's runner ServiceAccount, is controlled by a Job labelled as the manager's, and that
// Job is controlled by the live CAPTF object named in the Job's owner reference. The key is
// that object's state key; nothing else is served.
type Server struct {
	Master *Master
	// Reviews creates TokenReviews (the manager's client; system:auth-delegator's right).
	Reviews client.Client
	// Reader reads Pods, Jobs, ServiceAccounts and CAPTF objects live.
	Reader client.Reader
	// Addr is where Start listens (host:port); Cert its serving certificate.
	Addr string
	Cert tls.Certificate
}

// refusal is a request refused with a status and a reason safe to show the caller.
type refusal struct {
	code   int
	reason string
}

func (r *refusal) Error() string { return r.reason }

func refuse(code int, format string, args ...any) error {
	return &refusal{code: code, reason: fmt.Sprintf(format, args...)}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if req.URL.Path != Path || req.Method != http.MethodGet {
		http.Error(w, "GET "+Path+" is the only route", http.StatusNotFound)
		return
	}
	g, err := s.grant(req.Context(), req.Header.Get("Authorization"))
	if err != nil {
		var r *refusal
		if !errors.As(err, &r) {
			log.FromContext(req.Context()).Error(err, "State key request failed")
			r = &refusal{code: http.StatusServiceUnavailable, reason: "the manager could not check the request; try again"}
		}
		log.FromContext(req.Context()).Info("State key refused", "reason", r.reason)
		http.Error(w, r.reason, r.code)
		return
	}
	log.FromContext(req.Context()).V(1).Info("State key granted", "namespace", g.Namespace, "suffix", g.Suffix)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(g)
}

// grant checks a request's bearer token and returns the key it may have.
func (s *Server) grant(ctx context.Context, authorization string) (Grant, error) {
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || token == "" || len(token) > maxTokenBytes {
		return Grant{}, refuse(http.StatusUnauthorized, "a bearer token (the Pod's projected token of audience %s) is required", Audience)
	}
	review := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{Audience}}}
	if err := s.Reviews.Create(ctx, review); err != nil {
		return Grant{}, fmt.Errorf("statekey: token review: %w", err)
	}
	st := review.Status
	if !st.Authenticated || !contains(st.Audiences, Audience) {
		return Grant{}, refuse(http.StatusUnauthorized, "the token is not a valid token of audience %s", Audience)
	}
	ns, account, ok := serviceAccount(st.User.Username)
	podName, podUID := first(st.User.Extra[extraPodName]), first(st.User.Extra[extraPodUID])
	if !ok || podName == "" || podUID == "" {
		return Grant{}, refuse(http.StatusForbidden, "the token is not a ServiceAccount token bound to a Pod")
	}
	pod := &corev1.Pod{}
	if err := s.get(ctx, ns, podName, pod); err != nil {
		return Grant{}, err
	}
	job, err := s.jobOf(ctx, pod, podUID, account)
	if err != nil {
		return Grant{}, err
	}
	kind, name, err := s.objectOf(ctx, job)
	if err != nil {
		return Grant{}, err
	}
	suffix := contract.StateSuffix(ns, kind, name)
	key, err := s.Master.Key(ns, suffix)
	if err != nil {
		return Grant{}, err
	}
	return Grant{Namespace: ns, Suffix: suffix, Master: s.Master.ID(), Key: key}, nil
}

// jobOf checks the Pod is the token's and returns the manager's Job that controls it.
func (s *Server) jobOf(ctx context.Context, pod *corev1.Pod, uid, account string) (*batchv1.Job, error) {
	switch {
	case string(pod.UID) != uid:
		return nil, refuse(http.StatusForbidden, "the token's Pod %s no longer exists", pod.Name)
	case pod.Spec.ServiceAccountName != account:
		return nil, refuse(http.StatusForbidden, "Pod %s does not run as the token's ServiceAccount", pod.Name)
	}
	if account != runnerAccount {
		sa := &corev1.ServiceAccount{}
		if err := s.get(ctx, pod.Namespace, account, sa); err != nil {
			return nil, err
		}
		if sa.Labels[captfv1.RunnerLabel] != "true" {
			return nil, refuse(http.StatusForbidden, "ServiceAccount %s is not a runner account (label %s=true)", account, captfv1.RunnerLabel)
		}
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "Job" || ref.APIVersion != batchv1.SchemeGroupVersion.String() {
		return nil, refuse(http.StatusForbidden, "Pod %s is not controlled by a Job", pod.Name)
	}
	job := &batchv1.Job{}
	if err := s.get(ctx, pod.Namespace, ref.Name, job); err != nil {
		return nil, err
	}
	if job.UID != ref.UID || job.Labels[captfv1.ManagedLabel] != "true" {
		return nil, refuse(http.StatusForbidden, "Job %s of Pod %s is not a CAPTF Job", ref.Name, pod.Name)
	}
	return job, nil
}

// objectOf returns the kind and name of the live CAPTF object that controls the Job.
func (s *Server) objectOf(ctx context.Context, job *batchv1.Job) (kind, name string, err error) {
	ref := metav1.GetControllerOf(job)
	if ref == nil || ref.APIVersion != captfv1.GroupVersion.String() || !captfKind(ref.Kind) || job.Labels[captfv1.OwnerKindLabel] != ref.Kind {
		return "", "", refuse(http.StatusForbidden, "Job %s is not controlled by a CAPTF object", job.Name)
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(captfv1.GroupVersion.WithKind(ref.Kind))
	if err := s.get(ctx, job.Namespace, ref.Name, obj); err != nil {
		return "", "", err
	}
	if obj.GetUID() != types.UID(ref.UID) {
		return "", "", refuse(http.StatusForbidden, "Job %s belongs to an earlier %s %s", job.Name, ref.Kind, ref.Name)
	}
	return ref.Kind, ref.Name, nil
}

func (s *Server) get(ctx context.Context, ns, name string, obj client.Object) error {
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return refuse(http.StatusForbidden, "%T %s/%s does not exist", obj, ns, name)
		}
		return fmt.Errorf("statekey: get %s/%s: %w", ns, name, err)
	}
	return nil
}

func captfKind(k string) bool {
	return k == captfv1.KindCluster || k == captfv1.KindMachine || k == captfv1.KindMachinePool
}

// serviceAccount splits system:serviceaccount:<namespace>:<name>.
func serviceAccount(user string) (ns, name string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	ns, name, ok = strings.Cut(rest, ":")
	return ns, name, ok && ns != "" && name != ""
}

func first(v authnv1.ExtraValue) string {
	if len(v) == 1 {
		return v[0]
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// Start serves until ctx ends (a controller-runtime Runnable; every replica serves).
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fmt.Errorf("statekey: listen on %s: %w", s.Addr, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{s.Cert}, MinVersion: tls.VersionTLS13},
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("statekey: serve: %w", err)
	}
	return nil
}

// NeedLeaderElection is false: every replica holds the master key and serves.
func (s *Server) NeedLeaderElection() bool { return false }
