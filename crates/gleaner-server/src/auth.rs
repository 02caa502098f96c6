//! The server password and its constant-time check.
//!
//! The secret is kept only as its SHA-256 digest, and a password attempt is hashed and compared
//! digest to digest with `subtle`'s constant-time equality: the time taken depends neither on
//! where the first differing byte is nor on the secret's length (as Redis does since 6.0).

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A configured password (`--requirepass` or `--requirepass-file`).
#[derive(Clone)]
pub struct Password {
    digest: [u8; 32],
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(<hidden>)")
    }
}

impl Password {
    /// A password whose secret is `secret`.
    pub fn new(secret: &[u8]) -> Password {
        Password {
            digest: Sha256::digest(secret).into(),
        }
    }

    /// Whether `attempt` is the secret, in time independent of both.
    pub fn check(&self, attempt: &[u8]) -> bool {
        let attempt: [u8; 32] = Sha256::digest(attempt).into();
        self.digest.ct_eq(&attempt).into()
    }
}

#[cfg(test)]
mod tests {
    use super::Password;

    #[test]
    fn only_the_secret_passes() {
        let p = Password::new(b"s3cret");
        assert!(p.check(b"s3cret"));
        for wrong in [&b""[..], b"s3cre", b"s3cret ", b"S3cret", b"s3cret\0"] {
            assert!(!p.check(wrong), "{wrong:?}");
        }
        assert_eq!(format!("{p:?}"), "Password(<hidden>)");
    }
}
