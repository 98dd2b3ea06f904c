/*!
Sharded arrays and sharded matmuls in the book's notation (ch3):
`meshplan shard`.

* An array `A[I_X, J_Y]` on a mesh `X=4,Y=2`: its local shape
  `(|I|/|X|, |J|/|Y|)`, bytes per device (total / product of the axes it
  uses), the axes it is replicated over and the total bytes stored
  ([`ArrayReport`]).
* A product `A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]`: which of the book's four
  cases it is, the collectives it needs and the alternatives, their costs,
  the FLOPs per device and whether the communication hides under the
  compute ([`matmul::MatmulReport`]).

Sizes come from `--dims I=1024,J=4096` or are written in place
(`bf16[2048_X, 8192]`). The notation is parsed in [`notation`], the mesh in
[`mesh`].
*/

pub mod collective;
pub mod matmul;
pub mod mesh;
pub mod notation;

use serde::{Deserialize, Serialize};

use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::trace::{Step, Tracer};
use crate::units::{fmt_int, fmt_si, Bytes, DType};
use crate::view::{field, Doc, Render};
use mesh::NamedMesh;
use notation::{parse_expr, ArraySpec, DimSizes};

/// The question `meshplan shard` answers (flags, or a claim's `args`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct ShardQuery {
    /// An array (`A[I_X, J_Y]`) or a product (`A[I_X, J] * B[J, K_Y] -> C[I_X, K_Y]`).
    pub what: String,
    /// Dimension sizes ("I=1024,J=4096").
    #[cfg_attr(feature = "clap", arg(long))]
    pub dims: Option<String>,
    /// The mesh ("X=4,Y=2", "4x4").
    #[cfg_attr(feature = "clap", arg(long))]
    pub mesh: Option<String>,
    /// The chip: a catalog name (NAME@book for the book's numbers).
    #[cfg_attr(feature = "clap", arg(long))]
    pub hw: Option<String>,
    /// The dtype of arrays that write none (default bf16).
    #[cfg_attr(feature = "clap", arg(long))]
    pub dtype: Option<String>,
}

/// Every axis of `a` is in `mesh`, and every sharded dimension divides by
/// the product of its axes.
pub fn check_array(a: &ArraySpec, sizes: &DimSizes, mesh: &NamedMesh) -> Result<()> {
    for x in a.axes() {
        mesh.axis(x)?;
    }
    for d in &a.dims {
        let n = sizes.size_of(d)?;
        let k = mesh.size_of(&d.axes)?;
        if n % k != 0 {
            return Err(Error::Invalid(format!(
                "{}: dimension {} = {} is not divisible by {} = {k}; pick sizes the axes divide",
                a.notation(),
                d.name,
                fmt_int(n),
                d.axes.join("·")
            )));
        }
    }
    Ok(())
}

/// One array as laid out on the mesh.
#[derive(Clone, Debug, Serialize)]
pub struct ArrayReport {
    /// The array in the book's notation.
    pub array: String,
    /// Its dtype.
    pub dtype: DType,
    /// Global shape.
    pub shape: Vec<u64>,
    /// One device's shape.
    pub local_shape: Vec<u64>,
    /// Bytes of the whole array.
    pub total_bytes: f64,
    /// Bytes on each device.
    pub bytes_per_device: f64,
    /// Axes the array is sharded over.
    pub sharded_over: Vec<String>,
    /// Mesh axes the array is not split over (each device of them holds a copy).
    pub replicated_over: Vec<String>,
    /// Copies of each element across the mesh (product of `replicated_over`).
    pub replication: u64,
    /// Bytes stored across the whole mesh (bytes per device × devices).
    pub stored_bytes: f64,
    /// Axes holding unreduced partial sums.
    pub unreduced_over: Vec<String>,
    /// Devices in the mesh.
    pub devices: u64,
}

/// Lay out one array (book ch3): local shape `|I|/|X|`, bytes per device
/// `total / Π(axes used)`.
pub fn array_report<T: Tracer>(
    a: &ArraySpec,
    sizes: &DimSizes,
    mesh: &NamedMesh,
    tr: &mut T,
) -> Result<ArrayReport> {
    check_array(a, sizes, mesh)?;
    let shape = sizes.shape(a)?;
    let mut local = Vec::with_capacity(shape.len());
    for (d, n) in a.dims.iter().zip(&shape) {
        local.push(n / mesh.size_of(&d.axes)?);
    }
    let elems = shape
        .iter()
        .try_fold(1u64, |acc, &x| acc.checked_mul(x))
        .ok_or_else(|| {
            Error::Invalid(format!("{} has more than 2^64 - 1 elements", a.notation()))
        })?;
    let dtype = a.dtype.unwrap_or(DType::Bf16);
    let total = dtype.bytes_for(elems).get();
    let sharded: Vec<String> = a.dims.iter().flat_map(|d| d.axes.clone()).collect();
    let shard = mesh.size_of(&sharded)?;
    let per_device = total / shard as f64;
    let replicated: Vec<String> = mesh
        .axes
        .iter()
        .filter(|x| !sharded.contains(&x.name))
        .map(|x| x.name.clone())
        .collect();
    let replication = mesh.size_of(&replicated)?;
    let devices = mesh.devices();
    tr.record(|| {
        Step::new(
            "shard.bytes_per_device",
            &format!("Bytes per device of {}", a.notation()),
            "bytes(A) / Π|axes sharding A|",
        )
        .bind("bytes(A)", total, "B")
        .bind("Π|axes|", shard as f64, "")
        .result(per_device, "B")
        .source("How To Scale Your Model ch3 (sharding notation)")
    });
    Ok(ArrayReport {
        array: a.notation(),
        dtype,
        shape,
        local_shape: local,
        total_bytes: total,
        bytes_per_device: per_device,
        sharded_over: sharded,
        replicated_over: replicated,
        replication,
        stored_bytes: per_device * devices as f64,
        unreduced_over: a.unreduced.clone(),
        devices,
    })
}

fn fmt_shape(v: &[u64]) -> String {
    format!(
        "[{}]",
        v.iter().map(|x| fmt_int(*x)).collect::<Vec<_>>().join(", ")
    )
}

impl ArrayReport {
    /// The report's fields (shared with the matmul report).
    pub fn fields(&self) -> Vec<(String, String)> {
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.join(", ")
            }
        };
        vec![
            field("array", &self.array),
            field("global shape", fmt_shape(&self.shape)),
            field("local shape (per device)", fmt_shape(&self.local_shape)),
            field("total", Bytes::new(self.total_bytes).both()),
            field("per device", Bytes::new(self.bytes_per_device).both()),
            field("sharded over", list(&self.sharded_over)),
            field(
                "replicated over",
                format!(
                    "{} ({} copies)",
                    list(&self.replicated_over),
                    self.replication
                ),
            ),
            field(
                "stored on the mesh",
                format!(
                    "{} on {} devices",
                    fmt_si(self.stored_bytes, "B"),
                    self.devices
                ),
            ),
        ]
    }
}

impl Render for ArrayReport {
    fn doc(&self) -> Doc {
        let mut d = Doc::new();
        d.title(format!("{} on {} devices", self.array, self.devices));
        d.fields(self.fields());
        if !self.unreduced_over.is_empty() {
            d.note(format!(
                "partial sums over {}: an AllReduce (or a ReduceScatter) over those axes completes them",
                self.unreduced_over.join(", ")
            ));
        }
        d
    }
}

/// What `meshplan shard` reports: one array, or a sharded product.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum ShardReport {
    /// One array.
    Array(ArrayReport),
    /// A product of two arrays.
    Matmul(Box<matmul::MatmulReport>),
}

impl Render for ShardReport {
    fn doc(&self) -> Doc {
        match self {
            ShardReport::Array(a) => a.doc(),
            ShardReport::Matmul(m) => m.doc(),
        }
    }
}

/// Answer a shard query: an array's layout, or a product's collectives and costs.
pub fn evaluate<T: Tracer>(q: &ShardQuery, cat: &Catalog, tr: &mut T) -> Result<ShardReport> {
    let mut e = parse_expr(&q.what)?;
    if let Some(d) = q.dtype.as_deref().map(DType::parse).transpose()? {
        for a in e.inputs.iter_mut().chain(e.output.as_mut()) {
            a.dtype.get_or_insert(d);
        }
    }
    let sizes = DimSizes::parse(q.dims.as_deref().unwrap_or(""))?;
    let chip = cat.chip_given(&q.hw)?;
    let mesh_text = q.mesh.as_deref().ok_or_else(|| {
        Error::Invalid("no mesh: give --mesh X=4,Y=2 (or a slice shape like 4x4)".into())
    })?;
    let mesh = NamedMesh::parse(mesh_text, chip)?;
    if e.inputs.len() == 1 && e.output.is_none() {
        return Ok(ShardReport::Array(array_report(
            &e.inputs[0],
            &sizes,
            &mesh,
            tr,
        )?));
    }
    Ok(ShardReport::Matmul(Box::new(matmul::analyze(
        &e, &sizes, &mesh, chip, tr,
    )?)))
}
