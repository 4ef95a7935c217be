package install

import (
	"strings"
	"testing"
)

func TestParsePrintedSecret(t *testing.T) {
	log := `vcosim: serving whitesky.cloud simulator on [::]:8080 (API http://10.200.0.5:8080/api/1, IAM http://10.200.0.5:8080/iam)
# whitesky.cloud simulator credentials (capvco); apply with kubectl apply -f -
apiVersion: v1
kind: Secret
metadata:
  name: capvco-credentials
  namespace: demo
type: Opaque
stringData:
  url: http://10.200.0.5:8080/api/1
  customer: acme
  jwt: eyJ.x.y
  clientID: capvco
  clientSecret: s3cr3t
  iamURL: http://10.200.0.5:8080/iam
2026-11-29T17:50:00Z GET /api/1/customers/acme/cloudspaces 200 capvco
`
	s, err := parsePrintedSecret([]byte(log))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "capvco-credentials" || s.Namespace != "demo" || s.StringData["jwt"] != "eyJ.x.y" || s.StringData["iamURL"] != "http://10.200.0.5:8080/iam" {
		t.Errorf("got %+v", s)
	}

	// stdout and stderr interleave: the serving line may follow the manifest directly.
	banner, rest, _ := strings.Cut(log, "\n")
	s, err = parsePrintedSecret([]byte(strings.Replace(rest, "2026-11-29T17:50:00Z", banner+"\n2026-11-29T17:50:00Z", 1)))
	if err != nil {
		t.Fatalf("serving line after the manifest: %v", err)
	}
	if s.StringData["jwt"] != "eyJ.x.y" {
		t.Errorf("got %+v", s)
	}
}
