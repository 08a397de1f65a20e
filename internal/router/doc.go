// Package router turns received events into actions: it claims events client by
// client, applies the config's rules (keys, conditions, cancellations, ordering,
// money and params) and inserts one action per business operation, or links the
// event to the action that already has its operation key.
//
// It owns the move of events from received to routed, ignored, stale or conflict,
// and the actions' insertion. Only the engine starts it.
package router
