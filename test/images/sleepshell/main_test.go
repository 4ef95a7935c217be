package main

import (
	"syscall"
	"testing"
	"time"
)

func TestRun(t *testing.T) {
	cases := map[string]struct {
		args []string
		want int
	}{
		"exec sleep":          {[]string{"-c", "exec sleep 0.01"}, 0},
		"sleep":               {[]string{"-c", "sleep 0"}, 0},
		"not sleep":           {[]string{"-c", "echo hi"}, 127},
		"sleep and more":      {[]string{"-c", "sleep 1; rm -rf /"}, 127},
		"no -c":               {[]string{"script.sh"}, 127},
		"bad interval":        {[]string{"-c", "sleep soon"}, 1},
		"negative interval":   {[]string{"-c", "sleep -1"}, 1},
		"extra arguments":     {[]string{"-c", "sleep 1", "x"}, 127},
		"exec without sleeps": {[]string{"-c", "exec"}, 127},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := run(tc.args); got != tc.want {
				t.Errorf("run(%q) = %d, want %d", tc.args, got, tc.want)
			}
		})
	}
}

func TestRunStopsOnSIGTERM(t *testing.T) {
	done := make(chan int, 1)
	go func() { done <- run([]string{"-c", "exec sleep 30"}) }()
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if got != 128+int(syscall.SIGTERM) {
			t.Errorf("exit %d, want %d", got, 128+int(syscall.SIGTERM))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("still sleeping after SIGTERM")
	}
}
