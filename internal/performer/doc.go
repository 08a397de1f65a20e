// Package performer performs actions: it claims due actions under a lease, writes
// the attempt before the call, calls the destination outside any transaction,
// records each outcome through the decision table (a group of outcomes in one
// commit), reconciles uncertain ones with the destination's lookup before any
// repeat, and recovers lapsed leases.
//
// It owns the actions' worker states and the attempts. Only the engine starts it.
package performer
