// Command httpget fetches one URL and reports the answer, for checking from inside a pod (an
// ephemeral container shares the pod's network) that a Service is reachable:
//
//	httpget URL
//
// $HTTPGET_BEARER, when set, is sent as a Bearer token. It prints the status line and the start
// of the body, and exits 0 on a 2xx answer, 1 on any other answer and 2 when no answer came.
// The local cluster's images have no shell or curl, so test/images ships this instead.
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: httpget URL")
		return 2
	}
	req, err := http.NewRequest(http.MethodGet, args[0], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpget:", err)
		return 2
	}
	if tok := os.Getenv("HTTPGET_BEARER"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := (&http.Client{Timeout: 20 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "httpget:", err)
		return 2
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	fmt.Printf("GET %s: %s\n%s\n", args[0], resp.Status, body)
	if resp.StatusCode/100 != 2 {
		return 1
	}
	return 0
}
