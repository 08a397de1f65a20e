package views

// ActionPage is "/actions/{id}".
type ActionPage struct {
	Action       ActionInfo
	Events       []ActionEvent
	Diffs        []ParamDiff
	Attempts     []Attempt
	Audit        []AuditLine
	CanRetry     bool
	CanReconcile bool
	CanResolve   bool
	CanCancel    bool
	CanAssign    bool
	CanNote      bool  // may add a note (anyone who may act)
	CanSnooze    bool  // may snooze it (it waits for a person, and the person may act)
	SnoozedUntil Stamp // zero when it is not snoozed
	SnoozedBy    string
	Assignees    []Option
	// ReconcilePlan says what Reconcile would do; shown instead of the button
	// when Reconcile could find nothing out (CanReconcile false).
	ReconcilePlan string
	Disconnected  *Disconnected // the destination is disconnected; nil when connected
	Evidence      []Option      // what to look for at the destination by hand: label, value
	Queue         string        // the queue the action is in, for the forms to carry; "" when closed
	NextInQueue   *QueueNext    // after it left a queue by hand: where to go on
	// FollowOns are the actions waiting for this one, which Cancel cancels too.
	FollowOns []BulkRow
	// FollowOnIDs carries FollowOns in the Cancel form, so a cascade that changed
	// after the page was shown is refused.
	FollowOnIDs string
	CanCorrect  bool
	Correct     CorrectForm
	Correction  *OpenCorrection // a correction waiting for a decision; nil when none
	Imported    *Imported       // it was imported from an earlier system; nil when oncehook made it
	Erased      bool            // its params and key parts were erased on request (the audit trail says who and why)
}

// Imported says where an imported action came from (oncehook import).
type Imported struct {
	File, By, Destination string
	At                    Stamp
}

// CorrectForm is the form that corrects a rejected request, built from its params.
type CorrectForm struct {
	ProviderReason string
	NamedField     string // the param the provider's reason names; "" if none
	Fields         []CorrectField
	Approve        string // who approves: in words
}

// CorrectField is one top-level param: a string as it is, anything else as JSON.
type CorrectField struct {
	Name  string
	Value string
	JSON  bool
	Named bool // the provider's reason names it
}

// OpenCorrection is a correction waiting for approval.
type OpenCorrection struct {
	ProposedBy  string
	ProposedAt  Stamp
	Note        string
	Rows        []DiffRow // original beside corrected
	CanApprove  bool
	CanRefuse   bool
	WhyNot      string // why this person cannot approve it; "" when they can
	NewIdentity bool   // it will be sent under a new attempt identity
}

// QueueNext is the next action of the queue a person just worked one off.
type QueueNext struct {
	Queue    string
	QueueURL string
	Next     *BulkRow // nil when the queue is empty
}

// Disconnected is a destination that refused its credentials: what waits for it
// and who can reconnect it.
type Disconnected struct {
	Name         string
	Reason       string
	Owner        string // who to ask, for people who cannot reconnect it
	CanReconnect bool
	URL          string // where Reconnect is
}

// ActionInfo is the action itself.
type ActionInfo struct {
	ID           int64
	URL          string
	Name         string
	State        string
	Reason       string // in plain words
	ReasonDetail string // the stored reason behind Reason; "" when Reason is it
	NextStep     string
	BusinessKey  string
	OperationKey string
	Source       string
	Client       string
	Environment  string
	Destination  string
	Owner        string
	NoAccount    bool // the owner has no account
	Attempts     int32
	NextAttempt  Stamp
	ExternalRef  string
	AttemptKey   string // the new attempt identity a correction needed; "" if none
	Params       string // pretty JSON
	Created      Stamp
	Updated      Stamp
	StateSince   Stamp // when it entered its state
}

// ActionEvent is one event that asked for the action.
type ActionEvent struct {
	ID            int64
	URL           string
	Source        string
	SourceEventID string
	Type          string
	Status        string
	Deliveries    int32
	Conflict      bool
	Received      Stamp
}

// ParamDiff sets the action's parameters beside those a conflicting event asked for.
type ParamDiff struct {
	EventID  int64
	EventURL string
	Rows     []DiffRow
}

// DiffRow is one parameter of a ParamDiff.
type DiffRow struct {
	Name     string
	Original string
	Other    string
	Differs  bool
}

// Attempt is one call or lookup in the timeline.
type Attempt struct {
	Kind         string
	OperationKey string
	Status       string
	Observed     string
	HTTPStatus   string
	Duration     string
	Error        string
	Evidence     string
	Worker       string
	Started      Stamp
}

// AuditLine is one entry of the audit trail.
type AuditLine struct {
	At     Stamp
	Actor  string
	Act    string
	Note   string
	Detail string
}

// ReconcilePage is the confirmation step of a reconcile.
type ReconcilePage struct {
	URL         string
	Name        string
	BusinessKey string
	State       string
	Reason      string
	Plan        string // what Reconcile will do
	Blocked     string // why it cannot run now; "" when it can
}

// RetryPage is the confirmation step of a retry.
type RetryPage struct {
	ID           int64
	URL          string
	Name         string
	BusinessKey  string
	State        string
	Destination  string
	OperationKey string
	NeedsCheck   string // why the person must confirm they checked the destination; "" if not
	Error        string
	Note         string
	Disconnected *Disconnected // the retry will wait until it is reconnected
}

// EventPage is "/events/{id}".
type EventPage struct {
	ID            int64
	URL           string // this page: the acts' forms go under it
	Source        string
	SourceEventID string
	Type          string
	Status        string
	Reason        string
	Headers       []Header
	Payload       string
	Pruned        bool
	Erased        bool // its body and headers were erased on request
	Deliveries    int32
	Conflict      bool
	Received      Stamp
	LastReceived  Stamp
	Occurred      Stamp
	Conflicts     []ConflictBody
	Actions       []ActionRow
	Via           string
	Audit         []AuditLine
	CanReplay     bool   // routed already and its body kept
	ListURL       string // the events list, for this source
}

// Header is one stored identity header.
type Header struct {
	Name, Value string
}

// ConflictBody is a repeat of the event whose body differed.
type ConflictBody struct {
	Received Stamp
	Body     string
	// Changes are the values that differ from the stored body, by JSON pointer;
	// Same is how many values the two share.
	Changes []DiffRow
	Same    int
}

// SourcesPage is "/sources".
type SourcesPage struct {
	Rows     []SourceRow
	Backfill []BackfillRow
}

// BackfillRow is a backfilled source and what its last pass found.
type BackfillRow struct {
	Source    string
	How       string // what a pass does, in words
	Schedule  string // every and window
	LastPass  Stamp  // "" before the first
	Found     string // e.g. "40 listed, 3 missing, 3 stored"
	Error     string
	NextPass  Stamp
	EventsURL string // the source's backfilled events
}

// DestinationsPage is "/destinations".
type DestinationsPage struct {
	Rows         []DestinationRow
	CanReconnect bool
}

// BreakerConfirmPage is "/destinations/{name}/breaker": the step before a
// breaker is opened or closed by hand.
type BreakerConfirmPage struct {
	Name    string
	State   string // open or closed: what is asked
	Told    string // where its outage is told
	Waiting []WaitingView
	Reason  string
	Until   string // datetime-local, UTC
}

// WaitingView is how many actions of a client wait.
type WaitingView struct {
	Client  string
	Actions int64
}

// UsersPage is "/users".
type UsersPage struct {
	Rows     []UserRow
	Roles    []string
	NewEmail string
	NewRole  string
	MinChars int
	// Clients are the config's clients, to choose an operator's or viewer's from.
	Clients    []string
	NewClients []string
	// OwnersWithout are owners the config names that nobody signs in as.
	OwnersWithout []string
}

// UserRow is one user.
type UserRow struct {
	ID       int64
	Email    string
	Role     string
	Clients  []string
	Disabled bool
	Created  Stamp
	IsMe     bool
}

// TrendsPage is "/trends".
type TrendsPage struct {
	Window  string
	Windows []Option // hour, day, week, as links
	From    Stamp
	Queues  []Chart
	Dests   []Chart
}

// Chart is a small bar chart rendered as SVG, one group of bars per bucket.
type Chart struct {
	ID      string
	Title   string
	Summary string // the figures in words, for people who cannot see the chart
	Width   int
	Height  int
	Bars    []Bar
	Legend  []Option // series name and its CSS class (as Value)
	Max     int64
	Oldest  string // the left end, "1 week ago"
	Worse   bool   // the newest failures exceed the window's average
	// Recovered: the window had failures, and the newest buckets have none.
	Recovered bool
}

// Bar is one bar of a chart.
type Bar struct {
	X, Y, W, H int
	Class      string
	Title      string
}

// TokensPage is the API tokens page.
type TokensPage struct {
	Rows        []TokenRow
	Roles       []string
	Clients     []string // the config's, to choose a token's from
	DefaultDays int
	Audit       []TokenAuditRow
	// NewToken and NewName are a token just created, shown this once.
	NewToken, NewName string
}

// TokenRow is one API token.
type TokenRow struct {
	ID                         int64
	Name, Role, State          string
	Clients                    []string // none: every client (an admin's)
	Created, Expires, LastUsed Stamp    // Expires and LastUsed zero: never
}

// TokenAuditRow is one creation or revocation of a token.
type TokenAuditRow struct {
	At                Stamp
	Actor, Act, Token string
	ID                int64
}
