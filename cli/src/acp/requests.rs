//! Requests to the editor made on behalf of a turn (file reads and writes, terminals) are sent
//! from a task of the connection, not of the turn: a cancelled turn stops waiting for the
//! answer, while the request itself is left to the editor to finish. Dropping the SDK's own
//! request future would send `$/cancel_request`, which v1 editors need not know (the official
//! Python SDK 0.12 reports it as an unhandled notification).

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, Error, JsonRpcRequest};

const INTERNAL_ERROR: i32 = -32603;

/// Send `request` to the editor and wait for its answer (see the module's note on cancelling).
pub async fn ask<Req>(
    connection: &ConnectionTo<Client>,
    request: Req,
) -> Result<Req::Response, Error>
where
    Req: JsonRpcRequest + Send + 'static,
    Req::Response: Send + 'static,
{
    let (answered, answer) = tokio::sync::oneshot::channel();
    let to = connection.clone();
    connection.spawn(async move {
        let _ = answered.send(to.send_request(request).block_task().await);
        Ok(())
    })?;
    answer
        .await
        .map_err(|_| Error::new(INTERNAL_ERROR, "the connection to the editor closed"))?
}
