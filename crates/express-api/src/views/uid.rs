//! An object's uid as a view keeps it ([`Uid`]).

use std::fmt;

use uuid::Uuid;

/// An object's uid: the 16 bytes of the UUID the API server issues (written lowercase with
/// hyphens), or, for any other string a server or a test gives, that string. A UUID as text
/// is a 36-byte allocation (48 with the allocator's rounding); a node, its pod and the pod's
/// owner reference each keep one.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Uid {
    Uuid(Uuid),
    Other(Box<str>),
}

impl Uid {
    /// `uid` as kept: as a UUID only when writing that UUID gives `uid` back exactly.
    pub fn new(uid: &str) -> Uid {
        match Uuid::try_parse(uid) {
            Ok(uuid) if Uid::Uuid(uuid).is(uid) => Uid::Uuid(uuid),
            _ => Uid::Other(uid.into()),
        }
    }

    /// Whether it is `uid`, compared as text, without building its text.
    pub fn is(&self, uid: &str) -> bool {
        match self {
            Uid::Uuid(uuid) => {
                let mut text = [0; uuid::fmt::Hyphenated::LENGTH];
                *uuid.hyphenated().encode_lower(&mut text) == *uid
            }
            Uid::Other(other) => **other == *uid,
        }
    }
}

impl fmt::Display for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Uid::Uuid(uuid) => fmt::Display::fmt(&uuid.hyphenated(), f),
            Uid::Other(other) => f.write_str(other),
        }
    }
}

impl fmt::Debug for Uid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_string(), f)
    }
}

impl PartialEq<str> for Uid {
    fn eq(&self, other: &str) -> bool {
        self.is(other)
    }
}

impl PartialEq<&str> for Uid {
    fn eq(&self, other: &&str) -> bool {
        self.is(other)
    }
}

impl From<&str> for Uid {
    fn from(uid: &str) -> Self {
        Uid::new(uid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_is_kept_in_sixteen_bytes_only_when_its_text_comes_back_exactly() {
        let rows = [
            ("0b8e3c2a-5f1d-4e7a-9c3b-2d6f8a1e4b70", true),
            ("0B8E3C2A-5F1D-4E7A-9C3B-2D6F8A1E4B70", false),
            ("0b8e3c2a5f1d4e7a9c3b2d6f8a1e4b70", false),
            ("{0b8e3c2a-5f1d-4e7a-9c3b-2d6f8a1e4b70}", false),
            ("u1", false),
            ("", false),
        ];
        for (text, compact) in rows {
            let uid = Uid::new(text);
            assert_eq!(matches!(uid, Uid::Uuid(_)), compact, "{text}");
            assert_eq!(uid.to_string(), text);
            assert!(uid == text, "{text}");
            assert!(uid != "0b8e3c2a-5f1d-4e7a-9c3b-2d6f8a1e4b71", "{text}");
        }
        assert_eq!(size_of::<Option<Uid>>(), 24);
    }
}
