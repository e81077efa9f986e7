// Command loadfloor is a bare net/http server that reads each POST /v1/attempts body and answers
// ledgerd's fixed ingest answer, storing nothing: what any Go HTTP service pays per request on
// this machine at this moment. scripts/ingest-load.sh runs it with the same wrk client right after
// ledgerd, so one run gives ledgerd's one-record rate and CPU beside this floor's: the shared VM's
// speed moved by half between days, and ledgerd's figures with it.
//
// Usage: floor [ADDR]   (default 127.0.0.1:0; prints the address it listens on, then serves)
package main

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"time"
)

// answer is ledgerd's answer to one record accepted with nothing refused, byte for byte.
var answer = []byte("{\"accepted\":1,\"duplicates\":0,\"rejected\":[]}\n")

func main() {
	addr := "127.0.0.1:0"
	if len(os.Args) > 1 {
		addr = os.Args[1]
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatalf("floor: listen: %v", err)
	}
	fmt.Println(ln.Addr())
	// The same timeouts as ledgerd's server (app.Run), as each costs a deadline per request.
	srv := &http.Server{Handler: handler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 60 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 120 * time.Second}
	log.Fatal(srv.Serve(ln))
}

// handler reads each POST /v1/attempts body to its end, as ledgerd does, and answers answer.
func handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/attempts", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	return mux
}
