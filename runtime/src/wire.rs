//! What reaches rmcp from the wire: placeholder for the request guard.
