//! Several DCs (DESIGN section 13): selecting contexts from the kubeconfig ([`select`]),
//! reading them in parallel under a deadline ([`across`]), and the end every verb across
//! contexts shares ([`tail`]: exit code, unread lines, JSON entries, the CONTEXT table).

pub mod across;
pub mod select;
pub mod tail;
