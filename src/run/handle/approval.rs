//! The approval handlers: a suspended run resumed without decisions asks its approver now; a
//! run that cannot wait refuses the calls whose approval was deferred.

use tracing::Instrument;

use crate::run::handle::RunContext;
use crate::run::step::{Decision, Input};
use crate::tools::approval::{ApprovalDecision, ApprovalRequest};

/// Ask the approver about each of `requests`; the decisions, as the step machine's input.
pub(crate) async fn ask(cx: &RunContext<'_>, requests: Vec<ApprovalRequest>) -> Input {
    let mut decisions = Vec::with_capacity(requests.len());
    for request in requests {
        let answer = match cx.tools() {
            Some(registry) => {
                registry
                    .ask_pending(&request)
                    .instrument(cx.agent_span.clone())
                    .await
            }
            None => ApprovalDecision::Defer,
        };
        decisions.push(Decision::for_request(&request, answer));
    }
    Input::Decisions(decisions)
}

/// This caller cannot wait: the deferred calls are refused.
pub(crate) fn refuse_deferred(requests: Vec<ApprovalRequest>) -> Input {
    let reason = "its approval was deferred and this run cannot wait for a decision";
    Input::Decisions(
        requests
            .into_iter()
            .map(|request| Decision::deny(request.call_id, Some(reason.to_owned())))
            .collect(),
    )
}
