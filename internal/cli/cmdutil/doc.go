// Package cmdutil is the framework every capx command-line tool is built on (kubectl captf,
// kubectl capvco, capvco-gpucheck, and the manager's version command). Its API is small on
// purpose; a command package uses it like this:
//
//	type Options struct {
//		cmdutil.Deps // IO, Name and lazy Client, Kubernetes, Namespace: never called by --help or completion
//		Output cmdutil.Format
//	}
//
//	func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
//		opts := &Options{Deps: f.Deps()}
//		cmd := &cobra.Command{
//			Use: "list", Args: cmdutil.NoArgs,
//			ValidArgsFunction: cmdutil.CompleteNames(f, 1, &v1.ThingList{}),
//			RunE: func(cmd *cobra.Command, args []string) error {
//				if runF != nil { return runF(opts) }
//				return run(cmd.Context(), opts) // c, ns, err := opts.Connect()
//			},
//		}
//		cmdutil.AddOutputFlag(cmd, &opts.Output)
//		return cmd
//	}
//
// The pieces:
//
//   - [Factory] wraps cli-runtime's ConfigFlags (--kubeconfig, --context, -n, --as, ...). Its
//     RESTConfig, Client, Kubernetes and Namespace fields are functions that build what they
//     return on first call, so --help, completion and version never contact a cluster. Tests
//     build a Factory by hand ([NewTestFactory]) and set the fields to envtest clients.
//     [Factory.Deps] hands a command the streams, the binary's name and those functions in one
//     [Deps] value to embed in its Options; [Deps.Connect] builds the client and reads the namespace.
//     A kubeconfig that is not there ([KubeconfigProblem]) fails RESTConfig naming the file,
//     where client-go would fall back to localhost:8080.
//   - [IOStreams] carries stdin/stdout/stderr and whether each is a terminal; [TestIOStreams]
//     gives buffers that can pretend to be terminals.
//   - [Format] and [Print]: one printer for -o text|json|yaml. Machine output is a versioned
//     contract: every object printed as JSON or YAML starts with apiVersion ([APIVersion]) and
//     kind ([Meta]); fields are only added within a version, never renamed or removed.
//   - [Styles]: lipgloss styles that colour only when stdout is a terminal (or --color always),
//     and never when NO_COLOR is set (unless --color always).
//   - [Confirm]: asks on a terminal; without one it refuses unless the caller passed --yes.
//   - [ExitCode] and [WithCode]: typed exit codes, the same for every tool (see ExitCode), and
//     [Execute], which runs a root command and turns its error into the code.
//   - [CompleteNames] and [CompleteMatching]: shell completion of object names for positional
//     arguments (of the objects a filter accepts).
//   - [NamespaceHint] and [Elsewhere]: what a "not found in namespace" error adds, so that a
//     forgotten -n is found.
//   - [NewRoot] and [NewCmdVersion]: the root command a kubectl plugin starts from (global
//     flags, --color, completion including the kubectl_complete-<plugin> shim) and the shared
//     version command (the binary's version and, when reachable, the manager's, with a skew
//     warning).
package cmdutil
