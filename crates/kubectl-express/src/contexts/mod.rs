//! Several DCs (DESIGN section 13): the end every verb across contexts shares ([`tail`]: exit
//! code, unread lines, JSON entries, the CONTEXT table). Selecting contexts and reading them in
//! parallel is `express_client::contexts`.

pub mod tail;
