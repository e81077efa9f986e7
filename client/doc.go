// Package client records the LLM API calls of a Go service in ledgerd.
//
// A Transport wraps the http.RoundTripper given to the Anthropic, OpenAI or Gemini SDK (or any
// http.Client) and turns every HTTP attempt into a schema.Attempt: provider, model, outcome, latency
// and token usage converted to the ledger's non-overlapping counts, and the rate limits the
// provider's headers report with the organization they apply to (TransportOptions.Org, one per API
// key's organization). It never records prompt or reply text. A Reporter batches those records and posts them to ledgerd's ingest API in the background,
// without ever blocking the call being recorded.
//
//	rep, err := client.NewReporter(client.ReporterOptions{Endpoint: "http://ledgerd:8080", APIKey: key})
//	...
//	defer rep.Close(shutdownCtx)
//	tr, err := client.NewTransport(rep, client.TransportOptions{Service: "support-bot", Org: "acme-prod"})
//	...
//	hc := &http.Client{Transport: tr} // give hc to the SDK, e.g. option.WithHTTPClient(hc)
//
//	ctx = client.WithRequest(ctx, client.Call{RequestID: ticketID, Operation: "classify", Tenant: "acme"})
//	// every HTTP attempt made with ctx, the SDK's retries included, is numbered under ticketID
package client
