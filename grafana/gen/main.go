// Command gen writes ledgerd's Grafana dashboards as JSON files: go run ./grafana/gen -out
// grafana/dashboards (go generate ./grafana/ does this).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ledgerd/ledgerd/grafana"
)

func main() {
	out := flag.String("out", "dashboards", "folder the dashboard files are written to")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func write(dir string) error {
	files, err := grafana.Files()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write dashboard: %w", err)
		}
	}
	return nil
}
