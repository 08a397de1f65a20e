// Package views renders the dashboard's pages with templ. Every component takes
// plain view-model structs built by the web package, so the views know nothing of
// the database or the domain types.
package views

// Layout is what every page's frame needs.
type Layout struct {
	Title      string
	Section    string // the nav entry marked current: "overview", "failed", ...
	CSS        []string
	Scripts    []string // htmx and the dashboard's own, at their content-hashed URLs
	User       *User    // nil when signed out
	CSRF       string   // the session's synchronizer token, put in every form
	Flash      string
	FlashError string
	// FlashUndo is where the act the flash confirms is undone (an assign, a
	// snooze), offered for a few seconds; "" when it cannot be.
	FlashUndo string
	Kept      *KeptForm // a form sent after the session expired, offered again
	// Live pages update by themselves (with the script): LiveURL is polled and its
	// #live part swapped in; Live alone shows the status for a page whose own
	// parts poll (a queue's table).
	Live    bool
	LiveURL string
	LiveAt  Stamp // when the page was rendered
	// Icon is the page icon's URL; NavCounts the open actions of each queue, by
	// queue name, shown beside its link (absent when they could not be read).
	Icon      string
	NavCounts map[string]NavCount
}

// KeptForm is what a person typed into a form that arrived after their session
// expired: offered on the same page once they are signed in again.
type KeptForm struct {
	Action string // where it is sent
	Fields []KeptField
}

// KeptField is one field of a kept form; Label is "" for a field sent hidden.
type KeptField struct {
	Name, Value, Label string
}

// User is the signed-in person.
type User struct {
	ID    int64
	Email string
	Role  string
	Admin bool
}

// LoginPage is the sign-in form.
type LoginPage struct {
	Email       string
	Error       string
	Next        string // where to go after signing in
	Provider    string // the identity provider's name; "" when there is none
	NoPasswords bool   // the password form is gone
}

// ErrorPage is a refusal or failure in plain words.
type ErrorPage struct {
	Status  int
	Title   string
	Message string
	Back    string // a link back to where the person came from; "" for none
}

// ActionRow is one action in a table.
type ActionRow struct {
	ID          int64
	URL         string
	State       string
	Name        string
	BusinessKey string
	Source      string
	Destination string
	Owner       string
	NoAccount   bool // the owner has no account: nobody sees it under /mine
	Attempts    int32
	Created     Age    // since it was created
	Age         Age    // in its state
	Reason      string // in plain words
	// ReasonDetail is the stored reason behind Reason, shown on request; "" when
	// Reason is it.
	ReasonDetail string
	NextStep     string  // the short step, specific to what holds it
	Act          *RowAct // the next step's act, when the person may do it; nil otherwise
	Note         string  // the first words of its newest note; "" for none
	NoteBy       string  // who wrote it
	SnoozedUntil Stamp   // zero when it is not snoozed
	SnoozedBy    string
	// The keyboard's acts on the row (the queues' r and a): Retry's confirmation
	// page when the person may retry it now, and where an admin assigns it; "".
	RetryURL  string
	AssignURL string
}

// RowAct is a row's button for its next step: it opens the act's guard (its
// confirmation page, or its form on the action's page).
type RowAct struct {
	Label string
	URL   string
	Aria  string // what a screen reader hears: the act and the action
}

// QueueCard is one queue on the overview.
type QueueCard struct {
	Name        string
	URL         string
	Count       int64
	About, More bool // Count is an estimate; Count is a lower bound
	Oldest      Age  // zero when empty
	Causes      []CauseRow
}

// NavCount is how many actions wait in a queue, for the navigation.
type NavCount struct {
	N           int64
	About, More bool // N is an estimate; N is a lower bound
}

// SourceRow is one source with its delivery counts.
type SourceRow struct {
	Name          string
	Client        string
	Provider      string
	Scheme        string // how the sender is verified
	Account       string
	Environment   string
	IngestURL     string
	LastDelivery  Stamp
	LastAge       Age
	Events        int64
	Deliveries    int64
	Conflicts     int64
	DuplicateRate string
	About         bool // Events and Deliveries are estimates; the rest are of the newest 10,000 events
}

// DestinationRow is one destination with its connection state.
type DestinationRow struct {
	Name      string
	Type      string
	Status    string
	Reason    string
	Owner     string
	NoAccount bool // the owner has no account
	Held      int64
	HeldURL   string // the held actions in their queue
	Breaker   BreakerView
}

// BreakerView is a destination's breaker as the destinations page shows it.
type BreakerView struct {
	State      string // closed, open or half_open
	Since      Stamp
	Reason     string // the unwell answer that opened it
	NextProbe  Stamp  // open: when a probe may go
	LastProbe  Stamp
	LastAnswer string
	Parked     int64
	ParkedURL  string // the destination's actions in the outstanding queue
	Changes    []BreakerChange
	Outages    []OutageView
}

// OutageView is one outage of a destination and what was told of it.
type OutageView struct {
	Opened   Stamp
	Closed   Stamp // zero while it goes on
	Reopened int
	OpenedBy string
	Alerts   []AlertView
}

// AlertView is one alert of an outage on one channel: where it stands and
// its attempts.
type AlertView struct {
	Channel  string
	Kind     string // down or recovered
	State    string // pending, sent, failed or cancelled
	Due      Stamp  // pending: when it is (tried again)
	Sent     Stamp
	Attempts []AlertAttemptView
}

// AlertAttemptView is one attempt to send an alert.
type AlertAttemptView struct {
	At     Stamp
	OK     bool
	Status int
	Error  string
}

// BreakerChange is one change of a breaker.
type BreakerChange struct {
	At               Stamp
	From, To, Reason string
}

// OverviewPage is "/".
type OverviewPage struct {
	Queues       []QueueCard
	Mine         []ActionRow
	Sources      []SourceRow
	Destinations []DestinationRow
	Cutovers     []CutoverLine // the cutover windows not over yet
}

// CutoverLine is one action under a cutover window that has not ended.
type CutoverLine struct {
	Action, Destination string
	From, Until         Stamp
	LooksUp             bool // the destination has a lookup; else a person decides
}

// Option is one choice of a select.
type Option struct {
	Value, Label string
}

// Filter is a queue's filter, as the query string carries it.
type Filter struct {
	State, Source, Action, Destination, Owner, Client, Q string
	Sort                                                 string // the list's order: one of review.Sorts
	Reason                                               string // a part of the reason
	Since                                                string // created at or after: "2006-01-02" or "2006-01-02T15:04", UTC
	Until                                                string // created before, the same way
	HTTPStatus                                           string // an attempt got this reply status
	Snoozed                                              string // "" leaves out the snoozed, "only" shows them alone, "all" both
	Parked                                               string // "" leaves out what an open breaker parks, "only" shows them alone, "all" both
	Imported                                             string // "only": only the actions imported from an earlier system
}

// Pairs is the filter as query parameters, in the order forms and links carry them.
func (f Filter) Pairs() [][2]string {
	return [][2]string{{"state", f.State}, {"source", f.Source}, {"action", f.Action}, {"destination", f.Destination},
		{"client", f.Client}, {"owner", f.Owner}, {"q", f.Q}, {"reason", f.Reason}, {"since", f.Since},
		{"until", f.Until}, {"http_status", f.HTTPStatus}, {"snoozed", f.Snoozed}, {"parked", f.Parked}, {"imported", f.Imported},
		{"sort", f.Sort}}
}

// QueuePage is a queue, or "/mine".
type QueuePage struct {
	Title        string
	Path         string // the page's own path, where the filter form and bulk form point
	Intro        string
	Filter       Filter
	ShowFilter   bool
	Sources      []Option
	Actions      []Option
	Destinations []Option
	Clients      []Option
	Owners       []Option
	States       []Option // the queue's states, for a queue of more than one
	Table        QueueTable
	CanAssign    bool
	Assignees    []Option
}

// QueueTable is the htmx-refreshable part of a queue page.
type QueueTable struct {
	CanAct     bool   // the reader may act (not a viewer): the rows can be ticked for bulk acts
	Filter     Filter // what the rows were selected by; the bulk form carries it
	Rows       []ActionRow
	RefreshURL string // this page, filter and cursor included
	NextURL    string // "" on the last page
	FirstURL   string // "" on the first page
	CSVURL     string // every action the filter selects, as CSV
	Sorts      TableSorts
	// Counts are the page's states with how many actions the filter selects in
	// each; they are refreshed with the rows.
	Counts     []StateTotal
	Total      int64
	TotalAbout bool // Total is an estimate
	TotalMore  bool // Total is a lower bound: a count stopped
	Causes     []CauseRow
	// ReasonWalk, when not 0: the filter's part of a reason was looked for
	// among that many of each state's newest actions only.
	ReasonWalk int
}

// CauseRow is a group of open actions held by the same thing, with its fix.
type CauseRow struct {
	Label       string
	Count       int64
	About, More bool // Count is an estimate; Count is a lower bound
	State       string
	Fix         string
	URL         string // the queue filtered to these actions
	FixURL      string // where the fix is done; "" when it is done on the actions themselves
	Oldest      Age
}

// TableSorts are the headings a table of actions sorts by; zero ones do not sort.
type TableSorts struct {
	Created, Age SortHeader
}

// SortHeader is a column heading that sorts its table.
type SortHeader struct {
	URL   string // the table sorted by the column: the other way round when it already is
	Order string // "ascending" or "descending" when the table is sorted by it, for aria-sort
	Hint  string // what following the link does, in words
}

// StateTotal is how many actions a state holds, as a link to them.
type StateTotal struct {
	State string
	Count int64
	About bool // an estimate: past 1,000 the figure is the planner's
	More  bool // a lower bound: the count stopped there
	URL   string
}

// BulkPage reports a bulk act, the actions grouped by what became of them.
type BulkPage struct {
	Act     string
	Done    []BulkRow
	Refused []BulkRow
	Back    string
}

// BulkRow is one action of a bulk act.
type BulkRow struct {
	ID          int64
	URL         string
	Name        string
	BusinessKey string
	State       string
	Message     string // why it was refused, or will be
}

// BulkConfirm is the confirmation step of a bulk act, on the ticked rows or on all
// that match a filter: each action with its state, and which the guard will refuse.
type BulkConfirm struct {
	Act        string
	Ticked     bool   // the rows were ticked, not selected by the filter
	Path       string // the queue's path; the form posts to Path + "/bulk"
	Filter     Filter
	FilterText string    // the filter in words
	Owner      string    // for assign
	Rows       []BulkRow // the actions the act will be tried on; Message says why one will be refused
	WillDo     int       // how many the guard lets through
	TooMany    bool      // more than Max match: nothing is offered
	Max        int
	Back       string
}
