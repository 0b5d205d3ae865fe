//! The catalogue of links and devices (`models/links.yaml`, `models/devices.yaml`).

/// Names of the links declared in the catalogue.
pub fn link_names() -> Vec<String> {
    Vec::new()
}

/// Names of the devices declared in the catalogue.
pub fn device_names() -> Vec<String> {
    Vec::new()
}

/// sha256 of the catalogue files, part of a modelled run's identity.
pub fn catalogue_digest() -> String {
    String::new()
}
