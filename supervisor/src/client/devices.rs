//! `loopgate devices list|revoke|rotate`: the device tokens this gateway issued, over
//! `device.pair.list`, `device.token.revoke` and `device.token.rotate`.

use std::path::Path;
use std::process::ExitCode;

use ipc::gateway::{
    DevicePairListParams, DevicePairListResult, DeviceTokenRevokeParams, DeviceTokenRevokeResult,
    DeviceTokenRotateParams, DeviceTokenRotateResult, Method,
};

use ipc::text::printable;

use super::{emit, fail, Client, ClientError};

async fn call<P: serde::Serialize, R: serde::de::DeserializeOwned>(
    socket: &Path,
    method: Method,
    params: &P,
) -> Result<(serde_json::Value, R), ClientError> {
    let mut client = Client::connect(socket).await?;
    let params = serde_json::to_value(params).map_err(ClientError::Encode)?;
    let v = client.call(method, params).await?;
    let typed = serde_json::from_value(v.clone()).map_err(|why| ClientError::Reply {
        method: method.as_str(),
        why,
    })?;
    Ok((v, typed))
}

fn ms(at: Option<u64>) -> String {
    at.map_or_else(|| "-".to_owned(), |t| t.to_string())
}

pub async fn list(socket: &Path, as_json: bool) -> ExitCode {
    let (raw, r): (_, DevicePairListResult) =
        match call(socket, Method::DevicePairList, &DevicePairListParams {}).await {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
    if as_json {
        emit(&format!("{raw}\n"));
        return ExitCode::SUCCESS;
    }
    let mut out = format!(
        "{:<66} {:<20} {:<9} {:<9} {:<14} {:<14} {}\n",
        "DEVICE", "CLIENT", "ROLE", "STATE", "ISSUED_MS", "LAST_USED_MS", "SCOPES"
    );
    for d in &r.paired {
        for t in &d.tokens {
            let state = if t.revoked_at_ms.is_some() {
                "revoked"
            } else if d.connected {
                "connected"
            } else {
                "valid"
            };
            out.push_str(&format!(
                "{:<66} {:<20} {:<9} {:<9} {:<14} {:<14} {}\n",
                printable(&d.device_id),
                printable(&d.client_id),
                printable(&t.role),
                state,
                t.rotated_at_ms.unwrap_or(t.created_at_ms),
                ms(t.last_used_at_ms),
                printable(&t.scopes.join(","))
            ));
        }
    }
    out.push_str(&format!("\n{} device(s)\n", r.paired.len()));
    emit(&out);
    ExitCode::SUCCESS
}

pub async fn revoke(socket: &Path, device_id: String, role: String) -> ExitCode {
    let p = DeviceTokenRevokeParams { device_id, role };
    match call::<_, DeviceTokenRevokeResult>(socket, Method::DeviceTokenRevoke, &p).await {
        Ok((_, r)) => {
            emit(&format!(
                "revoked {} ({}) at {}; its connections were closed\n",
                r.device_id, r.role, r.revoked_at_ms
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

pub async fn rotate(socket: &Path, device_id: String, role: String) -> ExitCode {
    let p = DeviceTokenRotateParams {
        device_id,
        role,
        scopes: None,
    };
    match call::<_, DeviceTokenRotateResult>(socket, Method::DeviceTokenRotate, &p).await {
        Ok((_, r)) => {
            emit(&format!(
                "rotated {} ({}): the old token no longer works; the device gets a new one when it next connects with the gateway token\n",
                r.device_id, r.role
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}
