package hands

// Steps Init and Finish report through their progress callback
// (InitOptions.Progress, Finish's progress), with a detail line each. A
// step named like a Phase is reported right after that phase is written.
// Views group them by stage (InitStages, FinishStages) instead of
// spelling the names again.
const (
	StepRoot      = "root"   // the root is new and its ancestors are safe
	StepRuntime   = "engine" // the container runtime answers (init), or is the recorded one (finish); the wire name stays "engine"
	StepLayout    = "layout" // the directory layout is made
	StepLease     = "lease"  // evidence/ is held
	StepPrepared  = string(PhasePrepared)
	StepImage     = "image" // the image is local and pinned by id
	StepCreating  = string(PhaseCreating)
	StepCreated   = "created" // detail: the container id
	StepInodes    = "inodes"  // the runtime refused an inode bound: the workspace is bounded by size only
	StepOptions   = "options" // every create option was verified by inspection
	StepLabel     = "label"   // the owner label is verified
	StepStarted   = "started" // detail: the generation
	StepRunning   = string(PhaseRunning)
	StepPolicy    = "policy" // the initial policy is set
	StepReady     = string(PhaseReady)
	StepReceipt   = "receipt"   // finish: the receipt was read
	StepInspected = "inspected" // finish: the recorded container is ours and running
	StepStopped   = "stopped"   // the container is stopped (finish, or init's undo)
	StepFinished  = string(PhaseFinished)
	StepFailed    = string(PhaseFailed) // detail: the whole error; the last step of a failed init
)

// Stage is a group of steps a view shows as one row; the last step of a
// stage completes it.
type Stage struct {
	Name  string
	Steps []string
}

// InitStages are Init's steps, one stage per phase it writes.
var InitStages = []Stage{
	{Name: StepPrepared, Steps: []string{StepRoot, StepRuntime, StepLayout, StepLease, StepPrepared}},
	{Name: StepCreating, Steps: []string{StepImage, StepCreating, StepInodes, StepCreated, StepOptions, StepLabel}},
	{Name: StepRunning, Steps: []string{StepStarted, StepRunning}},
	{Name: StepReady, Steps: []string{StepPolicy, StepReady}},
}

// FinishStages are Finish's steps.
var FinishStages = []Stage{
	{Name: StepReceipt, Steps: []string{StepReceipt}},
	{Name: StepRuntime, Steps: []string{StepRuntime}},
	{Name: StepStopped, Steps: []string{StepInspected, StepStopped}},
	{Name: StepFinished, Steps: []string{StepFinished}},
}
