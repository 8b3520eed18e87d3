//! The dashboard's page, compiled into the binary: its HTML, style and script, and the
//! vendored uPlot charting library (1.6.32, MIT; `assets/vendor/uplot/VENDOR.md` says where it
//! came from and how to check it).

/// A file of the page: its path, content type and bytes.
pub struct Asset {
    /// The path it is served at.
    pub path: &'static str,
    /// Its content type.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static str,
}

/// Every file of the page.
pub const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_str!("assets/index.html"),
    },
    Asset {
        path: "/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/app.js"),
    },
    Asset {
        path: "/style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/style.css"),
    },
    Asset {
        path: "/vendor/uplot/uPlot.iife.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("assets/vendor/uplot/uPlot.iife.min.js"),
    },
    Asset {
        path: "/vendor/uplot/uPlot.min.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("assets/vendor/uplot/uPlot.min.css"),
    },
    Asset {
        path: "/vendor/uplot/LICENSE",
        content_type: "text/plain; charset=utf-8",
        body: include_str!("assets/vendor/uplot/LICENSE"),
    },
];

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    /// The vendored files are the package's own, byte for byte (VENDOR.md lists the digests).
    #[test]
    fn the_vendored_charting_library_is_the_pinned_release() {
        let vendor = include_str!("assets/vendor/uplot/VENDOR.md");
        for asset in super::ASSETS
            .iter()
            .filter(|a| a.path.starts_with("/vendor/"))
        {
            let digest = format!("{:x}", Sha256::digest(asset.body.as_bytes()));
            let name = asset.path.rsplit('/').next().unwrap();
            let line = vendor
                .lines()
                .find(|l| l.contains(name) && l.contains("sha256"))
                .unwrap_or_else(|| panic!("VENDOR.md lists {name}"));
            assert!(
                line.contains(&digest),
                "{name}: {digest} is not in `{line}`"
            );
        }
    }
}
