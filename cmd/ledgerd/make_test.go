package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeRunDatabase checks which database `make run` gives ledgerd: an exported DATABASE_URL
// (or one on make's command line) is used, LEDGERD_DATABASE_URL wins over it, and with neither the
// embedded database starts: never the Makefile's own default, the test server.
func TestMakeRunDatabase(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	cases := []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"neither", nil, nil, `DATABASE_URL="" `},
		{"exported", []string{"DATABASE_URL=postgres://me@db/ledger"}, nil, `DATABASE_URL="postgres://me@db/ledger" `},
		{"command line", nil, []string{"DATABASE_URL=postgres://cli@db/ledger"}, `DATABASE_URL="postgres://cli@db/ledger" `},
		{"ledgerd's wins", []string{"DATABASE_URL=postgres://me@db/ledger", "LEDGERD_DATABASE_URL=postgres://own@db/l"}, nil, `DATABASE_URL="postgres://own@db/l" `},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("make", append([]string{"-n", "-C", "../..", "run"}, tc.args...)...)
			for _, kv := range os.Environ() {
				if !strings.HasPrefix(kv, "DATABASE_URL=") && !strings.HasPrefix(kv, "LEDGERD_DATABASE_URL=") && !strings.HasPrefix(kv, "MAKEFLAGS=") {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, tc.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("make -n run: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want+"./bin/ledgerd serve") {
				t.Errorf("make -n run:\n%s\nwant %s./bin/ledgerd serve", out, tc.want)
			}
		})
	}
}

// TestInstallDepsDisablesServices runs scripts/install-deps.sh with apt, dpkg and systemd
// stubbed: the prometheus and alertmanager services it installs must be disabled afterwards, and
// a package installed before must be left alone.
func TestInstallDepsDisablesServices(t *testing.T) {
	t.Parallel()
	bin, state := t.TempDir(), t.TempDir()
	stubs := map[string]string{
		// installed once apt-get has run, except postgresql which was there before
		"dpkg-query":         `for a; do pkg=$a; done; if [ "$pkg" = postgresql ] || [ -e "$STATE/apt-ran" ]; then echo installed; fi`,
		"apt-get":            `touch "$STATE/apt-ran"`,
		"deb-systemd-helper": `echo "deb-systemd-helper $*" >> "$STATE/log"`,
		"systemctl":          `echo "systemctl $*" >> "$STATE/log"`,
		"sudo":               `shift; exec "$@"`,
	}
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("bash", "../../scripts/install-deps.sh", "postgresql", "prometheus", "prometheus-alertmanager")
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "STATE="+state,
		"INSTALL_DEPS_POLICY_RC_D="+filepath.Join(state, "policy-rc.d"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("install-deps.sh: %v\n%s", err, out)
	}
	log, _ := os.ReadFile(filepath.Join(state, "log"))
	for _, want := range []string{"deb-systemd-helper disable prometheus.service", "deb-systemd-helper disable prometheus-alertmanager.service"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("install-deps.sh did not run %q; it ran:\n%s\noutput:\n%s", want, log, out)
		}
	}
	if strings.Contains(string(log), "postgresql") {
		t.Errorf("install-deps.sh touched postgresql, installed before:\n%s", log)
	}
}
