package web_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// TestStaticFiles checks that every file a page links is served from the binary under a
// content-hashed URL, cacheable for good, and revalidates by ETag.
func TestStaticFiles(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	doc := s.fetch(t, browserClient(t), "/login", http.StatusOK)
	var urls []string
	for _, n := range findAll(doc, func(n *html.Node) bool { return n.Data == "script" && attr(n, "src") != "" }) {
		urls = append(urls, attr(n, "src"))
	}
	for _, n := range findAll(doc, func(n *html.Node) bool { return n.Data == "link" && attr(n, "rel") == "stylesheet" }) {
		urls = append(urls, attr(n, "href"))
	}
	if len(urls) != 4 {
		t.Fatalf("page links %v, want uPlot's script and style, charts.js and ledgerd.css", urls)
	}
	for _, u := range urls {
		if !strings.HasPrefix(u, "/static/") {
			t.Errorf("%s is not served by ledgerd", u)
			continue
		}
		resp, err := http.Get(s.URL + u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		etag := resp.Header.Get("ETag")
		if resp.StatusCode != http.StatusOK || len(body) == 0 || etag == "" ||
			resp.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" {
			t.Errorf("GET %s: status %d, %d bytes, ETag %q, Cache-Control %q", u, resp.StatusCode, len(body), etag, resp.Header.Get("Cache-Control"))
			continue
		}
		if !strings.Contains(u, strings.Trim(etag, `"`)) {
			t.Errorf("%s: ETag %s is not the hash in its name", u, etag)
		}
		req, _ := http.NewRequest(http.MethodGet, s.URL+u, nil)
		req.Header.Set("If-None-Match", etag)
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Errorf("GET %s If-None-Match: status %d, want 304", u, resp.StatusCode)
		}
	}
	// A stale hash is not served: the page that asked for it belongs to another build.
	resp, err := http.Get(s.URL + "/static/charts.0000000000.js")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown static file: status %d, want 404", resp.StatusCode)
	}
}

// TestVendoredUPlot checks that static/vendor holds the uPlot of package-lock.json, unmodified:
// the files scripts/vendor-web.sh copied, with the version and hashes it recorded.
func TestVendoredUPlot(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("package-lock.json")
	if err != nil {
		t.Fatal(err)
	}
	var lock struct {
		Packages map[string]struct {
			Version string `json:"version"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(raw, &lock); err != nil {
		t.Fatal(err)
	}
	want := lock.Packages["node_modules/uplot"].Version
	if want == "" {
		t.Fatal("package-lock.json pins no uplot")
	}
	f, err := os.Open("static/vendor/MANIFEST")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) != 4 || fields[0] != "uplot" {
			t.Fatalf("MANIFEST line %q", line)
		}
		version, name, sum := fields[1], fields[2], fields[3]
		if version != want {
			t.Errorf("%s is uplot %s, package-lock.json pins %s: run scripts/vendor-web.sh", name, version, want)
		}
		body, err := os.ReadFile("static/vendor/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(body); hex.EncodeToString(got[:]) != sum {
			t.Errorf("static/vendor/%s differs from what scripts/vendor-web.sh copied", name)
		}
		files++
	}
	if files != 3 {
		t.Errorf("MANIFEST lists %d files, want uPlot's script, style and licence", files)
	}
	js, err := os.ReadFile("static/vendor/uPlot.iife.min.js")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js[:min(len(js), 200)]), "(v"+want+")") {
		t.Errorf("uPlot.iife.min.js does not announce version %s in its header", want)
	}
}
