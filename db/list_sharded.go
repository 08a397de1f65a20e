package db

// Sharded is p for ActionListSharded, ActionList's form on Citus: the same
// filters, order and keyset over states, at most limit rows in all (that form
// has no walk per state to bound).
func (p ActionListParams) Sharded(states []string, limit int32) ActionListShardedParams {
	return ActionListShardedParams{States: states, Source: p.Source, Name: p.Name, Owner: p.Owner,
		Destination: p.Destination, Client: p.Client, AllClients: p.AllClients, ScopeClients: p.ScopeClients,
		Q: p.Q, Clients: p.Clients, Sources: p.Sources, Reason: p.Reason, Since: p.Since, Until: p.Until,
		HttpStatus: p.HttpStatus, Sort: p.Sort, PersonStates: p.PersonStates, CursorID: p.CursorID,
		CursorAt: p.CursorAt, MaxRows: limit}
}
