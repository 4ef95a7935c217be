package main

import (
	"strings"
	"testing"
)

func TestSubcommands(t *testing.T) {
	help := `kubectl captf operates CAPTF.

Usage:
  kubectl captf [flags]
  kubectl captf [command]

Plan commands:
  approve     Approve a plan
  plan        List and show plans

Inspection:

Additional Commands:
  completion  Generate the autocompletion script for the specified shell
  help        Help about any command

Flags:
  -h, --help   help for kubectl captf
  -n, --namespace string   namespace

Examples:
  kubectl captf approve demo

Use "kubectl captf [command] --help" for more information about a command.`
	got := strings.Join(subcommands(help), ",")
	if want := "approve,plan,completion,help"; got != want {
		t.Errorf("subcommands = %s, want %s", got, want)
	}
	if got := subcommands("Usage of vcosim:\n  -listen string\n    \taddress"); len(got) != 0 {
		t.Errorf("a flag-package usage has no subcommands, got %v", got)
	}
}

func TestAnchor(t *testing.T) {
	for in, want := range map[string]string{
		"kubectl captf plan show": "kubectl-captf-plan-show",
		"capvco-gpucheck":         "capvco-gpucheck",
	} {
		if got := anchor(in); got != want {
			t.Errorf("anchor(%q) = %q, want %q", in, got, want)
		}
	}
}
