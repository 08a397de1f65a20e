package db

// Action is the claimed action itself, without what the claim adds to it.
func (r ActionClaimRow) Action() Action {
	return Action{
		ID: r.ID, Client: r.Client, Environment: r.Environment, Source: r.Source, Name: r.Name,
		BusinessKey: r.BusinessKey, KeyParts: r.KeyParts, OperationKey: r.OperationKey,
		Destination: r.Destination, Params: r.Params, ParamsSha256: r.ParamsSha256, State: r.State,
		Reason: r.Reason, Owner: r.Owner, AfterID: r.AfterID, Resource: r.Resource,
		OccurredAt: r.OccurredAt, Attempts: r.Attempts, MaxAttempts: r.MaxAttempts,
		GiveUpAt: r.GiveUpAt, NextAttemptAt: r.NextAttemptAt, FirstAttemptAt: r.FirstAttemptAt,
		LastAttemptAt: r.LastAttemptAt, LeaseOwner: r.LeaseOwner, ClaimedFrom: r.ClaimedFrom,
		LeaseExpiresAt: r.LeaseExpiresAt, ExternalRef: r.ExternalRef, Result: r.Result,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, LeaseToken: r.LeaseToken, AttemptKey: r.AttemptKey,
		RowsDay: r.RowsDay,
	}
}
