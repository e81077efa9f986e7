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
//
// # Retries without WithRequest
//
// Without a Call in the context, the retries an SDK makes by itself are still grouped: the
// Anthropic and OpenAI Go SDKs send X-Stainless-Retry-Count (0 on the first attempt, then 1, 2)
// on a clone of the same request, and the Transport numbers attempts with the same method, URL and
// body and consecutive counts as one logical request; a request carrying an Idempotency-Key (as
// other Stainless SDKs send) is grouped by that key. The Gemini SDK sends neither, so its retries
// stay separate requests. Two identical calls (same body) in flight at once cannot be told apart
// by their headers; their retries may be numbered under either.
//
// What remains the caller's job, with WithRequest and WithFallback: a retry loop of the service's
// own around the SDK (each SDK call starts again at retry count 0), a fallback to another model,
// and the operation, tenant and prompt hash labels.
package client
