// Package logs is `kubectl captf logs OBJECT`: the runner log of the object's latest Job (or
// the one before it), optionally followed.
package logs

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	captfv1 "github.com/capx-io/capx/api/captf/v1alpha1"
	"github.com/capx-io/capx/internal/cli/captf/objects"
	"github.com/capx-io/capx/internal/cli/cmdutil"
)

// Container is the Job container the runner and the runtime write to.
const Container = "source"

// Options are the command's inputs.
type Options struct {
	cmdutil.Deps

	Arg       string
	Previous  bool
	Follow    bool
	Container string
	Timeout   time.Duration
}

// NewCmd returns the command; runF replaces run in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Deps: f.Deps(), Timeout: 2 * time.Minute}
	cmd := &cobra.Command{
		Use:   "logs OBJECT",
		Short: "Print the runner log of an object's latest Job",
		Long: `Print the log of the latest Job (plan, apply, destroy, refresh, drift or restore) of a
TerraformCluster, TerraformMachinePool or TerraformMachine (NAME or KIND/NAME): the runner's
steps and the OpenTofu output, with secrets redacted by the runner. --previous prints the Job
before it; -f follows a running Job (waiting for its pod to start).`,
		Example: fmt.Sprintf(`  %[1]s logs my-cluster -n team-a
  %[1]s logs tfm/worker-0 -f
  %[1]s logs my-cluster --previous`, f.Name),
		Args:              cmdutil.ExactArgs(1),
		ValidArgsFunction: cmdutil.CompleteNames(f, 1, objects.Lists()...),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Arg = args[0]
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Previous, "previous", "p", false, "The Job before the latest one.")
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "Follow the log of a running Job.")
	cmd.Flags().StringVarP(&opts.Container, "container", "c", Container, "Container: source (runner and OpenTofu) or runner (the init container that installs it).")
	return cmd
}

// Jobs returns the object's Jobs, newest first.
func Jobs(ctx context.Context, c client.Reader, o *objects.Object) ([]batchv1.Job, error) {
	var list batchv1.JobList
	if err := c.List(ctx, &list, client.InNamespace(o.Namespace()), o.Owner().Selector()); err != nil {
		return nil, fmt.Errorf("list the Jobs of %s: %w", o.Ref(), err)
	}
	sort.SliceStable(list.Items, func(i, j int) bool {
		a, b := list.Items[i].CreationTimestamp, list.Items[j].CreationTimestamp
		if !a.Equal(&b) {
			return b.Before(&a)
		}
		return list.Items[i].Name > list.Items[j].Name
	})
	return list.Items, nil
}

func run(ctx context.Context, opts *Options) error {
	c, ns, err := opts.Connect()
	if err != nil {
		return err
	}
	cs, err := opts.Kubernetes()
	if err != nil {
		return err
	}
	o, err := objects.Get(ctx, c, ns, opts.Arg)
	if err != nil {
		return err
	}
	jobs, err := Jobs(ctx, c, o)
	if err != nil {
		return err
	}
	i := 0
	if opts.Previous {
		i = 1
	}
	if len(jobs) <= i {
		what := "no Jobs"
		if opts.Previous && len(jobs) == 1 {
			what = "only one Job"
		}
		return cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("%s has %s (finished Jobs are pruned to the jobs history limits)", o.Ref(), what))
	}
	job := jobs[i]
	fmt.Fprintf(opts.IO.ErrOut, "Job %s (%s, attempt %s)\n", job.Name, job.Labels[captfv1.OperationLabel], job.Labels[captfv1.AttemptLabel])
	pod, err := podOf(ctx, cs, opts, &job)
	if err != nil {
		return err
	}
	req := cs.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: opts.Container, Follow: opts.Follow})
	stream, err := req.Stream(ctx)
	if err != nil {
		return fmt.Errorf("read the log of pod %s: %w", pod.Name, err)
	}
	defer stream.Close()
	_, err = io.Copy(opts.IO.Out, stream)
	return err
}

// podOf finds the Job's newest pod; following, it waits for one that has started.
func podOf(ctx context.Context, cs kubernetes.Interface, opts *Options, job *batchv1.Job) (*corev1.Pod, error) {
	var pod *corev1.Pod
	find := func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods(job.Namespace).List(ctx, metaListOptions(job.Name))
		if err != nil {
			return false, fmt.Errorf("list the pods of Job %s: %w", job.Name, err)
		}
		sort.SliceStable(pods.Items, func(i, j int) bool {
			a, b := pods.Items[i].CreationTimestamp, pods.Items[j].CreationTimestamp
			return b.Before(&a)
		})
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.Status.Phase != corev1.PodPending || !opts.Follow {
				pod = p
				return true, nil
			}
		}
		return false, nil
	}
	if !opts.Follow {
		if ok, err := find(ctx); err != nil || ok {
			return pod, err
		}
		return nil, cmdutil.WithCode(cmdutil.ExitFailure, fmt.Errorf("Job %s has no pods (they are deleted with finished Jobs)", job.Name))
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, time.Second, true, find); err != nil {
		return nil, fmt.Errorf("no started pod of Job %s after %s: %w", job.Name, opts.Timeout, err)
	}
	return pod, nil
}

// metaListOptions selects a Job's pods by the label the Job controller sets on them.
func metaListOptions(job string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job}
}
