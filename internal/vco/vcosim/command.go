package vcosim

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/template"
	"time"
)

// Main is cmd/vcosim: serve the simulator, print a ready-to-use credentials Secret, stop on
// SIGINT/SIGTERM; `vcosim version` prints the build instead. It returns the exit code: 0 after
// a clean stop, 1 on a runtime error, 2 on bad flags or arguments.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "version" {
		return versionMain(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("vcosim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on; 127.0.0.1:0 picks a free loopback port, 0.0.0.0:8080 serves a pod")
	advertise := fs.String("advertise-url", "", "base URL to print in the Secret (e.g. http://vcosim.vcosim.svc:8080); default derived from -listen")
	stateFile := fs.String("state-file", "", "persist state here (JSON, rewritten after every change) so a restart keeps everything")
	timeScale := fs.Float64("time-scale", 1, "multiplier for the platform's slow operations (DNS writes ~30 s, VM create ~2 s); 0.01 for quick demos")
	linkFailures := fs.Float64("link-delete-failure-rate", 0.2, "chance that a connected-cloudspace delete fails with 400/500, as on the platform")
	faultsFile := fs.String("faults", "", "JSON fault set to install at start (the body of PUT /sim/v1/faults)")
	strict := fs.Bool("strict-query", false, "answer 400 for undeclared query parameters (the real API ignores them)")
	tokenTTL := fs.Duration("token-ttl", 24*time.Hour, "lifetime of the printed and issued JWTs")
	secretName := fs.String("secret-name", "capvco-credentials", "name of the printed Secret")
	secretNS := fs.String("secret-namespace", "default", "namespace of the printed Secret")
	principal := fs.String("principal", SeedClusterPrinc, "seeded identity whose credentials are printed ("+SeedClusterPrinc+" or "+SeedOperatorPrinc+")")
	quiet := fs.Bool("quiet", false, "do not log requests")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 { // a mistyped subcommand must not start serving
		fmt.Fprintf(stderr, "vcosim: unexpected argument %q: the one subcommand is version; flags: vcosim -h\n", fs.Arg(0))
		return 2
	}
	if *timeScale <= 0 {
		*timeScale = -1 // no delays at all
	}
	opts := Options{StateFile: *stateFile, TimeScale: *timeScale, LinkDeleteFailureRate: *linkFailures, StrictQuery: *strict, TokenTTL: *tokenTTL}
	if !*quiet {
		opts.Logf = func(format string, a ...any) {
			fmt.Fprintf(stderr, time.Now().Format(time.RFC3339)+" "+format+"\n", a...)
		}
	}
	srv, err := Start(*listen, *advertise, opts)
	if err != nil {
		fmt.Fprintln(stderr, "vcosim:", err)
		return 1
	}
	if *faultsFile != "" {
		if err := loadFaults(srv.Sim, *faultsFile); err != nil {
			fmt.Fprintln(stderr, "vcosim:", err)
			_ = srv.Close()
			return 2
		}
	}
	fmt.Fprintf(stderr, "vcosim: serving %s on %s (API %s, IAM %s)\n", "whitesky.cloud simulator", srv.Addr(), srv.APIURL(), srv.IAMURL())
	if err := srv.printSecret(stdout, *principal, *secretName, *secretNS); err != nil {
		fmt.Fprintln(stderr, "vcosim:", err)
		_ = srv.Close()
		return 1
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(stop)
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case <-stop:
		fmt.Fprintln(stderr, "vcosim: stopping")
		if err := srv.Shutdown(10 * time.Second); err != nil {
			fmt.Fprintln(stderr, "vcosim:", err)
			return 1
		}
		return 0
	case err := <-done:
		if err != nil {
			fmt.Fprintln(stderr, "vcosim:", err)
			return 1
		}
		return 0
	}
}

func loadFaults(s *Sim, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading faults: %w", err)
	}
	var set FaultSet
	if err := json.Unmarshal(b, &set); err != nil {
		return fmt.Errorf("faults file %s: %w", path, err)
	}
	return s.faults.Apply(set)
}

var secretTemplate = template.Must(template.New("secret").Parse(`# whitesky.cloud simulator credentials ({{.Principal}}); apply with kubectl apply -f -; plain http off loopback needs the manager's --vco-allow-http (capvco-gpucheck: --allow-http)
apiVersion: v1
kind: Secret
metadata:
  name: {{.Name}}
  namespace: {{.Namespace}}
type: Opaque
stringData:
  url: {{.URL}}
  customer: {{.Customer}}
  jwt: {{.JWT}}
  clientID: {{.ClientID}}
  clientSecret: {{.ClientSecret}}
  iamURL: {{.IAMURL}}
`))

// printSecret writes the Kubernetes Secret a CAPVCO cluster (or gpucheck) needs to talk to
// this simulator. The simulator speaks plain http, which the client refuses on hosts other than
// loopback unless the program using the Secret allows it (a Secret cannot): the banner says
// which flag. Printing the token is the point of the command; it never goes to the log.
func (s *Server) printSecret(w io.Writer, principal, name, namespace string) error {
	tok, err := s.Token(principal, 0)
	if err != nil {
		return err
	}
	id, secret, err := s.ClientSecret(principal)
	if err != nil {
		return err
	}
	s.mu.Lock()
	customer := s.st.Principals[principal].Customer
	s.mu.Unlock()
	for _, v := range []string{name, namespace} {
		if strings.ContainsAny(v, ":\n\"' ") {
			return fmt.Errorf("invalid Secret name or namespace %q", v)
		}
	}
	return secretTemplate.Execute(w, map[string]string{
		"Principal": principal, "Name": name, "Namespace": namespace, "URL": s.APIURL(), "Customer": customer,
		"JWT": tok, "ClientID": id, "ClientSecret": secret, "IAMURL": s.IAMURL(),
	})
}
