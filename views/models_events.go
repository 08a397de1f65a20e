package views

// EventFilter is the events list's filter, as the query string carries it.
type EventFilter struct {
	Source, Status, Type, Via, From, To, Q string
}

// EventRow is one event in the events list.
type EventRow struct {
	ID            int64
	URL           string
	Source        string
	SourceEventID string
	Type          string
	Status        string
	Via           string
	Deliveries    int32
	Received      Stamp
	Reason        string
}

// EventsPage is "/events": the filter, one page of events and, for admins, the
// way to replay all that match.
type EventsPage struct {
	Filter    EventFilter
	Sources   []Option
	Statuses  []Option
	Vias      []Option
	Rows      []EventRow
	NextURL   string
	FirstURL  string
	ReplayURL string // the confirmation step of "replay all that match"; "" for operators
}

// ReplayAllPage is the confirmation of "replay all that match": how many, and why.
type ReplayAllPage struct {
	Filter  EventFilter
	Count   int
	TooMany bool // more than one replay may take: narrow the filter
	Back    string
	Error   string
}
