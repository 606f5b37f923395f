//! [`Run`]: a run's state, owned while the run goes on. The conversation gets its committed
//! history back however the run ends — finished, failed, suspended, or dropped mid-turn
//! (cancelled: a turn in which some tool started is kept, see [`step`]).

use crate::context::ContextState;
use crate::run::budget;
use crate::run::call_updates::CallUpdates;
use crate::run::handle::observer::StartedCalls;
use crate::run::input_stream::InputStreams;
use crate::run::state::{Phase, RunState};
use crate::run::step::{Effect, Input, step};
use crate::run::usage::UsageTally;
use crate::vocab::OpenaiChatMessage;

/// One run's state and what it gives back to its conversation.
pub(crate) struct Run<'a> {
    pub history: &'a mut Vec<OpenaiChatMessage>,
    pub usage: &'a mut UsageTally,
    /// The conversation's context engine state (window, calibration).
    pub context: &'a mut ContextState,
    pub state: RunState,
    /// The batch in flight: which of its calls' tools started (set as each starts, before it
    /// finishes) and their positions in the turn.
    pub in_flight: Option<(StartedCalls, Vec<usize>)>,
    /// The run suspended: its state went to the caller, nothing is cancelled.
    pub suspended: bool,
    /// What the run's tools report while they run.
    pub call_updates: CallUpdates,
    /// The calls of the reply in progress whose arguments stream (titles, watchers).
    pub input_streams: InputStreams,
}

impl Run<'_> {
    /// Feed `input` to the step machine; the next effect.
    pub(crate) fn step(&mut self, input: Input) -> Effect {
        let placeholder = RunState::new(Vec::new(), self.state.rules, false);
        let (state, effect) = step(std::mem::replace(&mut self.state, placeholder), input);
        self.state = state;
        effect
    }

    /// Copy the started flags of the batch in flight into the state.
    pub(crate) fn collect_started(&mut self) {
        if let Some((started, positions)) = self.in_flight.take() {
            for (index, &position) in positions.iter().enumerate() {
                if started.get(index) {
                    self.state.mark_started(position);
                }
            }
        }
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        let ended = matches!(
            self.state.phase,
            Phase::Finished { .. } | Phase::Failed { .. }
        );
        if !ended && !self.suspended {
            self.collect_started();
            let _ = self.step(Input::Cancel);
        }
        let committed = self.state.committed.min(self.state.messages.len());
        self.state.messages.truncate(committed);
        *self.history = std::mem::take(&mut self.state.messages);
        self.usage.record(budget::run_usage(&self.state));
    }
}
