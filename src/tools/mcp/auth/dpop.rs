//! [`DpopKey`]: a client's DPoP key (RFC 9449) and the proofs it signs — a P-256 key pair, an
//! ES256 proof JWT per request (`typ: dpop+jwt`, the public key as `jwk`, a fresh `jti`, the
//! method and URL as `htm`/`htu`, `iat`, and `ath`/`nonce` when there are).

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::json;
use sha2::{Digest, Sha256};

/// The only proof algorithm agcore signs with (what authorization servers name in
/// `dpop_signing_alg_values_supported`).
pub(crate) const DPOP_ALGORITHM: &str = "ES256";

/// Why a DPoP key or proof could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DpopError {
    /// The crypto library refused to generate, read or use the key.
    #[error("DPoP key: {0}")]
    Key(&'static str),
    /// The request URL is not an absolute HTTP(S) URL a proof can name.
    #[error("DPoP proof: {url} is not an HTTP(S) URL")]
    Url {
        /// The URL (without its query, which may hold secrets).
        url: String,
    },
}

/// A P-256 key pair whose public half goes into every proof. `Debug` shows its thumbprint
/// only: the private key is never printed or logged.
pub(crate) struct DpopKey {
    pair: EcdsaKeyPair,
    /// The public JWK's members, RFC 7638 order (`crv`, `kty`, `x`, `y`).
    x: String,
    y: String,
    thumbprint: String,
}

impl fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpopKey")
            .field("jkt", &self.thumbprint)
            .finish_non_exhaustive()
    }
}

impl DpopKey {
    /// A new random key.
    pub(crate) fn generate() -> Result<Self, DpopError> {
        let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
            .map_err(|_| DpopError::Key("cannot generate a P-256 key"))?;
        Self::from_pair(pair)
    }

    /// The key stored as PKCS#8 (see [`DpopKey::to_pkcs8`]).
    pub(crate) fn from_pkcs8(der: &[u8]) -> Result<Self, DpopError> {
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der)
            .map_err(|_| DpopError::Key("not a P-256 PKCS#8 key"))?;
        Self::from_pair(pair)
    }

    /// The private key as PKCS#8 DER, to keep with the credentials it is bound to.
    pub(crate) fn to_pkcs8(&self) -> Result<Vec<u8>, DpopError> {
        self.pair
            .to_pkcs8v1()
            .map(|document| document.as_ref().to_vec())
            .map_err(|_| DpopError::Key("cannot encode the key"))
    }

    fn from_pair(pair: EcdsaKeyPair) -> Result<Self, DpopError> {
        // An uncompressed SEC1 point: 0x04, then X and Y, 32 bytes each.
        let point = pair.public_key().as_ref();
        if point.len() != 65 || point[0] != 4 {
            return Err(DpopError::Key("unexpected public key encoding"));
        }
        let x = URL_SAFE_NO_PAD.encode(&point[1..33]);
        let y = URL_SAFE_NO_PAD.encode(&point[33..65]);
        // RFC 7638: the required members in lexicographic order, no whitespace.
        let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        let thumbprint = URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()));
        Ok(DpopKey {
            pair,
            x,
            y,
            thumbprint,
        })
    }

    /// The public key as a JWK (what the proofs carry in their header).
    pub(crate) fn public_jwk(&self) -> serde_json::Value {
        json!({ "kty": "EC", "crv": "P-256", "x": self.x, "y": self.y })
    }

    /// The JWK SHA-256 thumbprint (RFC 7638), which a bound token names as `cnf.jkt`.
    pub(crate) fn thumbprint(&self) -> &str {
        &self.thumbprint
    }

    /// A fresh proof for one `method` request to `url`; `access_token` binds it to the token
    /// it accompanies (`ath`), `nonce` is the server's latest `DPoP-Nonce`.
    pub(crate) fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, DpopError> {
        let iat = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or_default();
        let mut jti = [0_u8; 16];
        aws_lc_rs::rand::fill(&mut jti).map_err(|_| DpopError::Key("no randomness"))?;
        let header = json!({ "typ": "dpop+jwt", "alg": DPOP_ALGORITHM, "jwk": self.public_jwk() });
        let mut claims = json!({
            "jti": URL_SAFE_NO_PAD.encode(jti),
            "htm": method,
            "htu": htu(url)?,
            "iat": iat,
        });
        if let Some(token) = access_token {
            claims["ath"] = json!(ath(token));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = json!(nonce);
        }
        let signing_input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let signature = self
            .pair
            .sign(&rng, signing_input.as_bytes())
            .map_err(|_| DpopError::Key("cannot sign"))?;
        Ok(format!(
            "{signing_input}.{}",
            URL_SAFE_NO_PAD.encode(signature.as_ref())
        ))
    }
}

/// The `htu` of a request to `url`: the URL without query and fragment (RFC 9449 §4.2), with
/// scheme and host lower-cased and a default port dropped.
pub(crate) fn htu(url: &str) -> Result<String, DpopError> {
    let without_query = || url.split(['?', '#']).next().unwrap_or_default().to_owned();
    let mut parsed = url::Url::parse(url).map_err(|_| DpopError::Url {
        url: without_query(),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || !parsed.has_host() {
        return Err(DpopError::Url {
            url: without_query(),
        });
    }
    parsed.set_query(None);
    parsed.set_fragment(None);
    Ok(parsed.into())
}

/// `ath`: the base64url SHA-256 of the access token (RFC 9449 §4.2).
pub(crate) fn ath(access_token: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(access_token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};
    use serde_json::Value;

    fn decode(part: &str) -> Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part).unwrap()).unwrap()
    }

    /// The proof's header and claims, after checking its signature with the public key in its
    /// own `jwk` header (as a server does).
    fn verified(proof: &str) -> (Value, Value) {
        let parts: Vec<&str> = proof.split('.').collect();
        assert_eq!(parts.len(), 3, "{proof}");
        let header = decode(parts[0]);
        let jwk = &header["jwk"];
        let coordinate = |name: &str| URL_SAFE_NO_PAD.decode(jwk[name].as_str().unwrap()).unwrap();
        let mut point = vec![4_u8];
        point.extend(coordinate("x"));
        point.extend(coordinate("y"));
        let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
            .expect("the signature verifies with the proof's own jwk");
        (header, decode(parts[1]))
    }

    #[test]
    fn a_resource_proof_carries_the_claims_and_verifies_with_its_jwk() {
        let key = DpopKey::generate().unwrap();
        let proof = key
            .proof(
                "POST",
                "https://MCP.example.com:443/mcp?x=1#frag",
                Some("tok-123"),
                Some("n-1"),
            )
            .unwrap();
        let (header, claims) = verified(&proof);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["jwk"]["kty"], "EC");
        assert_eq!(header["jwk"]["crv"], "P-256");
        assert!(
            header["jwk"].get("d").is_none(),
            "no private key in the proof"
        );
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://mcp.example.com/mcp");
        assert_eq!(claims["nonce"], "n-1");
        // SHA-256("tok-123"), base64url without padding.
        assert_eq!(claims["ath"], "yJY0FL9sTIae6sX4oFfD3FdNQi8bEIOXtm9nurPS-YE");
        assert_eq!(claims["ath"], ath("tok-123"));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert!(claims["iat"].as_u64().unwrap().abs_diff(now) <= 5);
        assert_eq!(claims["jti"].as_str().unwrap().len(), 22);
    }

    #[test]
    fn a_token_request_proof_has_no_ath_or_nonce_and_every_proof_a_new_jti() {
        let key = DpopKey::generate().unwrap();
        let first = key
            .proof("POST", "http://127.0.0.1:9/token", None, None)
            .unwrap();
        let (_, claims) = verified(&first);
        assert!(claims.get("ath").is_none() && claims.get("nonce").is_none());
        assert_eq!(claims["htu"], "http://127.0.0.1:9/token");
        let (_, again) = verified(
            &key.proof("POST", "http://127.0.0.1:9/token", None, None)
                .unwrap(),
        );
        assert_ne!(claims["jti"], again["jti"]);
    }

    #[test]
    fn htu_drops_query_fragment_and_default_port_and_refuses_non_http() {
        assert_eq!(
            htu("HTTP://Example.COM:80/a/b?token=secret").unwrap(),
            "http://example.com/a/b"
        );
        assert_eq!(
            htu("http://[::1]:8080/mcp#x").unwrap(),
            "http://[::1]:8080/mcp"
        );
        let error = htu("file:///etc/passwd?secret").unwrap_err().to_string();
        assert!(!error.contains("secret"), "{error}");
        assert!(htu("not a url").is_err());
    }

    #[test]
    fn the_thumbprint_is_rfc_7638_and_the_key_survives_pkcs8() {
        let key = DpopKey::generate().unwrap();
        let jwk = key.public_jwk();
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            jwk["x"].as_str().unwrap(),
            jwk["y"].as_str().unwrap()
        );
        assert_eq!(
            key.thumbprint(),
            URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
        );
        let again = DpopKey::from_pkcs8(&key.to_pkcs8().unwrap()).unwrap();
        assert_eq!(again.thumbprint(), key.thumbprint());
        let (header, _) = verified(&again.proof("GET", "https://x/mcp", None, None).unwrap());
        assert_eq!(header["jwk"], jwk);
        // The private key never shows: `Debug` is the public thumbprint only.
        assert_eq!(
            format!("{key:?}"),
            format!("DpopKey {{ jkt: {:?}, .. }}", key.thumbprint())
        );
        assert!(DpopKey::from_pkcs8(b"garbage").is_err());
    }
}
