package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync/atomic"
)

// Call describes one logical request of a service to an LLM: every HTTP attempt made for it (the
// SDK's own retries, the service's retries, a fallback to another model) shares its RequestID and is
// numbered 1, 2, 3, ... by the Transport.
type Call struct {
	// RequestID identifies the logical request; WithRequest generates a random one when empty.
	RequestID string
	// Service names the calling service; empty means the Transport's TransportOptions.Service.
	Service string
	// Operation names what the call is for, such as "classify-ticket"; empty means "default".
	Operation string
	// Tenant is the customer or team the call is made for, if any.
	Tenant string
	// Fallback marks attempts made with a stand-in model after the primary one failed.
	Fallback bool
	// FallbackFrom names the model the fallback stands in for; it requires Fallback.
	FallbackFrom string
	// PromptHash is an optional hash of the prompt template, never the prompt itself.
	PromptHash string
}

// callKey is the context key of a *callState.
type callKey struct{}

// callState is what a context carries: the call and the counter of its HTTP attempts, shared by
// every context derived for the same RequestID.
type callState struct {
	call     Call
	attempts *atomic.Int64
}

// WithRequest returns a context carrying c, so that the Transport labels every HTTP attempt made with
// it. Call it once per logical request, outside any retry loop. If ctx already carries a call with the
// same RequestID, attempt numbering continues from it (use this for a fallback, or see WithFallback).
func WithRequest(ctx context.Context, c Call) context.Context {
	if c.RequestID == "" {
		c.RequestID = newID()
	}
	st := &callState{call: c}
	if prev, ok := ctx.Value(callKey{}).(*callState); ok && prev.call.RequestID == c.RequestID {
		st.attempts = prev.attempts
	} else {
		st.attempts = new(atomic.Int64)
	}
	return context.WithValue(ctx, callKey{}, st)
}

// WithFallback returns a context for attempts that stand in for model from, continuing the
// numbering of the call ctx carries. Without a call in ctx it starts a new logical request.
func WithFallback(ctx context.Context, from string) context.Context {
	var c Call
	if prev, ok := ctx.Value(callKey{}).(*callState); ok {
		c = prev.call
	}
	c.Fallback = true
	c.FallbackFrom = from
	return WithRequest(ctx, c)
}

// nextAttempt returns the call ctx carries and the number of the HTTP attempt about to be made;
// inCall is false for a context without a call, which gets a new request id and attempt number 1.
func nextAttempt(ctx context.Context) (c Call, no int, inCall bool) {
	st, ok := ctx.Value(callKey{}).(*callState)
	if !ok {
		return Call{RequestID: newID()}, 1, false
	}
	return st.call, int(st.attempts.Add(1)), true
}

// newID returns 128 random bits as 32 hex digits.
func newID() string {
	var b [16]byte
	// crypto/rand.Read never fails (it crashes the program instead), see its documentation.
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
